"""An install without a checkout: the built wheel in a fresh virtual environment gives a working `rag-bot` that
keeps its store in the user's data folder and indexes the seeds shipped inside the package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import ROOT


@pytest.mark.slow
def test_the_wheel_installs_and_answers_from_any_folder(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(wheels), str(ROOT)], check=True, capture_output=True, timeout=300)
    (wheel,) = wheels.glob("rag_bot-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    # The dependencies are the test environment's (installing them again would take minutes and the network);
    # rag-bot itself comes from the wheel only: the checkout is not on the path.
    python = venv / "bin" / "python"
    home = tmp_path / "home"
    work = tmp_path / "somewhere"
    work.mkdir()
    # PYTHONPATH too: a run that puts the checkout on it (`PYTHONPATH=. pytest`) would import rag_bot from there, and
    # pip would take the checkout's rag_bot.egg-info (left by the wheel build) for rag-bot already installed.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BOT_", "OPENAI_")) and k != "PYTHONPATH"}
    env.update(HOME=str(home), XDG_DATA_HOME=str(home / "data"), GRADIO_ANALYTICS_ENABLED="False")
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True, env=env).stdout.strip()
    Path(site, "test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)], check=True,
                   capture_output=True, timeout=300, env=env)
    rag_bot = str(venv / "bin" / "rag-bot")
    where = subprocess.run([str(python), "-c", "import rag_bot; print(rag_bot.__file__)"], cwd=work, env=env,
                           check=True, capture_output=True, text=True).stdout
    assert str(venv) in where, "rag_bot is imported from the wheel, not from the checkout"

    ingest = subprocess.run([rag_bot, "ingest", "--quiet"], cwd=work, env=env, capture_output=True, text=True,
                            timeout=600)
    assert ingest.returncode == 0, ingest.stderr
    assert "Read 38 papers from 2 files" in ingest.stdout
    assert (home / "data" / "rag-bot" / "storage" / "chroma.sqlite3").is_file()
    assert list(work.iterdir()) == [], "nothing is written into the current folder"

    ask = subprocess.run([rag_bot, "ask", "--json", "What does CorrSteer gain on HarmBench?"], cwd=work, env=env,
                         capture_output=True, text=True, timeout=300)
    assert ask.returncode == 0, ask.stderr
    answer = json.loads(ask.stdout)
    assert answer["grounded"] and "27.1" in answer["answer"]
