"""Load test of the chat: the real server (`rag-bot serve`) on a free port, N users for S seconds.

Half of the users ask through the streamed chat (`/chat`, the event the Send button runs), half through
`/ask` (the JSON API), each in its own process with its own gradio_client session (as each person has their own
browser; 20 sessions in one process queue behind one interpreter lock), one question after the other without
pause. Latency is per question, from the call to the complete answer. Writes docs/load.md.

The server runs in its own session: Linux' autogroup scheduling gives each session one share of the CPU, so a
server started in the bench's session competed with its own 20 clients for one share (and /chat, with more steps
per answer than /ask, waited most: 2.6 s against 1.2 s at the median in the same run).

The chat users behave as a browser does: each answer offers its conversation and references as files (the
export and reference download buttons), which a browser fetches only when one is clicked, so the clients do not
download them (`download_files=False`). `--download-files` makes them download every file of every answer, as
gradio_client does by default (4 more requests per answer, each on a new connection).

So that a loaded machine can be told from a slow server, it also records the machine's load average before and
after the run and the CPU time the server process used during it (from /proc): CPU seconds per answer is what
the server costs, whatever else runs on the machine. `--profile out.txt` records the server with py-spy
(`pip install py-spy`) during the run and writes its hottest functions.

    .venv/bin/python -m bench.perf.load                       # a temp store of the seeds, 20 users, 60 s
    .venv/bin/python -m bench.perf.load --storage storage --users 10 --seconds 30 --out /tmp/load.md
    .venv/bin/python -m bench.perf.load --seconds 20 --out /tmp/load.md --profile /tmp/serve-profile.txt
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RAG_BOT = str(Path(sys.executable).parent / "rag-bot")
QUESTIONS = [
    "what does CorrSteer gain on HarmBench?",
    "how much faster is OServe?",
    "Summarize the work on federated LoRA fine-tuning",
    "Compare CorrSteer and SARSteer",
    "Which papers study LLM inference serving?",
    "What does SARSteer do?",
    "How do I make a sourdough bread starter?",
    "Summarize the work on LLM inference",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def seed_store(folder: Path) -> Path:
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    storage = folder / "store"
    Engine(Settings(storage=storage)).ingest([ROOT / "seeds"])
    return storage


def start_server(storage: Path, workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BOT_", "OPENAI_"))}
    env.update(RAG_BOT_STORAGE=str(storage), RAG_BOT_PORT=str(port), RAG_BOT_HOST="127.0.0.1",
               RAG_BOT_LOG_LEVEL="WARNING", GRADIO_ANALYTICS_ENABLED="False")
    if os.environ.get("BENCH_CHROMA_URL"):  # bench/perf/million.py --server
        env["RAG_BOT_CHROMA_URL"] = os.environ["BENCH_CHROMA_URL"]
    log = (workdir / "serve.log").open("wb")
    # Its own session, as a server is not one of its users: with the kernel's autogroup scheduling (Linux' default
    # on desktops and on this machine), processes of one session share one slice of the CPU, so a server in the
    # bench's session would be starved by the 20 clients it is serving, which use more CPU than it does.
    proc = subprocess.Popen([RAG_BOT, "serve"], env=env, cwd=workdir, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"rag-bot serve exited with {proc.returncode}; see {workdir / 'serve.log'}")
        try:
            with urllib.request.urlopen(url + "config", timeout=2):
                return proc, url
        except (OSError, urllib.error.HTTPError):
            time.sleep(0.5)
    proc.kill()
    raise SystemExit("rag-bot serve did not start within 180 s")


def client_for(url: str, download_files: bool) -> Any:
    """A gradio_client session; it downloads the answers' files only if `download_files`."""
    from gradio_client import Client

    if download_files:
        return Client(url, verbose=False)
    return Client(url, verbose=False, download_files=False)


def user(url: str, kind: str, index: int, seconds: float, download_files: bool, ready: Any, go: Any,
         out: Any) -> None:
    """One user, in its own process (as each person has their own browser): its session, then questions one after
    the other for `seconds` from `go`; puts (kind, latencies, errors, CPU seconds of this process) on `out`."""
    client = client_for(url, download_files)
    latencies: list[float] = []
    errors: list[str] = []
    ready.put(index)
    go.wait()
    cpu = time.process_time()
    stop = time.monotonic() + seconds
    n = index
    while time.monotonic() < stop:
        question = QUESTIONS[n % len(QUESTIONS)]
        n += 1
        start = time.perf_counter()
        try:
            if kind == "chat":
                messages, *_ = client.predict(question, [], "Auto", 6, api_name="/chat")
                assert messages and messages[-1]["role"] == "assistant", "no answer in the chat"
            else:
                result = client.predict(question, "Auto", 0, api_name="/ask")
                assert "answer" in result, "no answer in the JSON"
        except Exception as exc:  # counted, not raised: the run goes on
            errors.append(f"{type(exc).__name__}: {exc}"[:200])
            continue
        latencies.append(time.perf_counter() - start)
    out.put((kind, latencies, errors, time.process_time() - cpu))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its reaped children so far (Linux /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
    return (utime + stime + cutime + cstime) / os.sysconf("SC_CLK_TCK")


def load_average() -> str:
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def start_profile(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes] | None:
    """py-spy sampling the server for `seconds` (raw collapsed stacks in `out`.raw), None if py-spy is missing."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        print("py-spy not found (pip install py-spy): no profile", file=sys.stderr)
        return None
    return subprocess.Popen([spy, "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", "50",
                             "--format", "raw", "--nonblocking", "-o", str(out) + ".raw"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def summarize_profile(raw: Path, out: Path, top: int = 40) -> None:
    """From py-spy's collapsed stacks: the functions holding the most samples, inclusive and own."""
    inclusive: dict[str, int] = {}
    own: dict[str, int] = {}
    total = 0
    for line in raw.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        frames = stack.split(";")
        total += n
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + n
        own[frames[-1]] = own.get(frames[-1], 0) + n
    lines = [f"{total} samples", "", "inclusive:"]
    lines += [f"{100 * n / total:5.1f}%  {f}" for f, n in sorted(inclusive.items(), key=lambda x: -x[1])[:top]]
    lines += ["", "own:"]
    lines += [f"{100 * n / total:5.1f}%  {f}" for f, n in sorted(own.items(), key=lambda x: -x[1])[:top]]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


def warm_up(url: str, download_files: bool = False) -> float:
    """Each question once through `/chat` (which also runs `/ask`'s engine path), one after the other, before
    the timed run: a served collection's sentence vectors are computed at their first use and then cached, so
    without this the first seconds measure that one-off cost. Returns the seconds it took."""
    start = time.perf_counter()
    client = client_for(url, download_files)
    for question in QUESTIONS:
        client.predict(question, [], "Auto", 6, api_name="/chat")
    return time.perf_counter() - start


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--storage", type=Path, help="store folder to serve (default: a temp store of the seeds)")
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "load.md")
    parser.add_argument("--no-warmup", action="store_true", help="measure from a cold start (no warm-up round)")
    parser.add_argument("--profile", type=Path, help="record the server with py-spy; its hottest functions here")
    parser.add_argument("--download-files", action="store_true",
                        help="chat users download every file each answer offers (gradio_client's default; a browser "
                             "fetches them only on a click)")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="rag-bot-load-"))
    try:
        storage = args.storage or seed_store(workdir)
        proc, url = start_server(storage, workdir)
        try:
            warmup = None if args.no_warmup else warm_up(url, args.download_files)
            results: dict[str, list[float]] = {"chat": [], "ask": []}
            errors: dict[str, list[str]] = {"chat": [], "ask": []}
            # One process per user: in one process, 20 gradio_client sessions share one interpreter lock, and the
            # client's own work (parsing and applying each streamed update) queues behind it.
            context = multiprocessing.get_context("spawn")
            ready, go, out = context.Queue(), context.Event(), context.Queue()
            users = [context.Process(target=user, args=(url, "chat" if i % 2 == 0 else "ask", i, args.seconds,
                                                        args.download_files, ready, go, out), daemon=True)
                     for i in range(args.users)]
            for process in users:
                process.start()
            for _ in users:  # every session open before the clock starts
                ready.get(timeout=300)
            load_before = load_average()
            cpu_before = cpu_seconds(proc.pid)
            spy = start_profile(proc.pid, args.seconds, args.profile) if args.profile else None
            began = time.monotonic()
            go.set()
            clients_cpu = 0.0
            for _ in users:
                kind, latencies, failures, cpu = out.get(timeout=args.seconds + 300)
                results[kind] += latencies
                errors[kind] += failures
                clients_cpu += cpu
            elapsed = time.monotonic() - began
            server_cpu = cpu_seconds(proc.pid) - cpu_before
            load_after = load_average()
            for process in users:
                process.join(timeout=30)
            if spy is not None and args.profile:
                spy.wait(timeout=120)
                summarize_profile(Path(str(args.profile) + ".raw"), args.profile)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    rows = []
    for kind, label in (("chat", "`/chat` (streamed chat)"), ("ask", "`/ask` (JSON)")):
        values = results[kind]
        if values:
            rows.append(f"| {label} | {args.users // 2 if kind == 'ask' else (args.users + 1) // 2} | {len(values)} | "
                        f"{statistics.median(values):.2f} | {percentile(values, 0.95):.2f} | {max(values):.2f} | "
                        f"{len(values) / elapsed:.1f} | {len(errors[kind])} |")
        else:
            rows.append(f"| {label} | - | 0 | - | - | - | 0 | {len(errors[kind])} |")
    every = results["chat"] + results["ask"]
    total_errors = len(errors["chat"]) + len(errors["ask"])
    p95 = percentile(every, 0.95) if every else float("nan")
    verdict = "met" if total_errors == 0 and p95 <= 2.0 else "NOT met"
    cores = os.cpu_count() or 1
    text = "\n".join([
        "# Chat load test",
        "",
        f"`bench/perf/load.py`: the real `rag-bot serve` over {'the seed collection' if not args.storage else args.storage}"
        f" (offline composer), {args.users} users for {args.seconds:.0f} s, half through the streamed chat "
        "(`/chat`), half through `/ask`, each user asking one question after the other with no pause "
        "(gradio_client, one session and one process per user, all on the same machine as the server). Latency: "
        "from the call to "
        "the complete answer, in seconds. "
        + ("The chat users download every file each answer offers (`--download-files`). " if args.download_files
           else "As a browser, the chat users do not download the export and reference files each answer offers "
                "(a browser fetches one when it is clicked). ")
        + ("No warm-up: the run starts on a cold server." if warmup is None else
           f"Before the timed run, each of the {len(QUESTIONS)} questions was asked once ({warmup:.1f} s), so the "
           "collection's sentence vectors (computed once per paper, then cached) are in memory as on a server "
           "that has answered a few questions."),
        "",
        f"Machine: {os.cpu_count()} cores ({platform.machine()}, {platform.system()}, Python "
        f"{platform.python_version()}); commit {commit()}; {time.strftime('%Y-%m-%d')}.",
        "",
        "| endpoint | users | answers | p50 | p95 | max | answers/s | errors |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"All: {len(every)} answers, {len(every) / elapsed:.1f}/s, p95 {p95:.2f} s, {total_errors} errors. "
        f"Target (0 errors, p95 ≤ 2 s): **{verdict}**.",
        "",
        f"Machine load average (1 / 5 / 15 min): {load_before} before the run, {load_after} after it "
        f"({cores} cores). Server CPU time during the run: {server_cpu:.1f} s of {elapsed:.0f} s "
        f"({100 * server_cpu / elapsed / cores:.0f}% of the machine), "
        f"{server_cpu / max(1, len(every)) * 1000:.0f} ms per answer, so the server alone could answer about "
        f"{cores * len(every) / max(server_cpu, 1e-9):.0f} questions/s on {cores} idle cores. The {args.users} "
        f"client processes (on the same cores) used {clients_cpu:.1f} s of CPU, "
        f"{clients_cpu / max(1, len(every)) * 1000:.0f} ms per answer.",
    ])
    if total_errors:
        text += "\n\nFirst errors:\n\n" + "\n".join(f"- {e}" for e in (errors["chat"] + errors["ask"])[:5])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
