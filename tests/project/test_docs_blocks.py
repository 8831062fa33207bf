"""Every fenced code block of README.md and docs/*.md pastes and runs as it reads: shell blocks parse (`bash -n`),
run only programs a reader has (a comment without its `#` would run as a command), name only real `rag-bot` flags
(rag-bot's own argparse parser) and only real RAG_BOT_* settings; Python compiles, JSON loads, TOML and YAML parse;
a text block's `$ rag-bot …` lines are real commands too. Nothing is run, so the test is fast."""

from __future__ import annotations

import ast
import json
import re
import shlex
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import AliasChoices

from rag_bot.settings import Settings
from rag_bot.surfaces.cli import build_parser
from tests.conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)\s*$")
SHELL = {"bash", "sh", "shell", "console"}
LANGUAGES = SHELL | {"python", "json", "toml", "yaml", "text", "env"}
# The programs the docs' shell blocks run: ours, the tools the docs tell a reader to install, and the shell's own.
PROGRAMS = {
    "rag-bot", "make", "python", "python3", "pip", "pipx", "chroma", "curl", "llm", "npx", "mcp-inspector",
    "llama-server", "vllm", "ollama", "docker", "git", "cat", "cd", "export", "mkdir", "ls", "echo", "sleep", "kill",
    "mkdocs", "pytest", "ruff", "mypy", "duplicates", "apt-get", "sudo", "wait", "head", "tail", "gzip", "zcat",
}
ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=")
SEPARATORS = {";", "&", "&&", "||", "|", "(", ")", "\n"}


@dataclass
class Block:
    """One fenced code block: where it is, its language and its text."""

    doc: Path
    line: int
    language: str
    text: str

    def __str__(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line} ({self.language or 'no language'})"


def blocks(doc: Path) -> list[Block]:
    """The fenced code blocks of one Markdown file."""
    lines = doc.read_text(encoding="utf-8").split("\n")
    found, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip().startswith(m.group(2)))
            indent = len(m.group(1))
            found.append(Block(doc, i + 1, m.group(3).lower(), "\n".join(x[indent:] for x in lines[i + 1:end])))
            i = end
        i += 1
    return found


ALL = [b for doc in DOCS for b in blocks(doc)]


def known_variables() -> set[str]:
    """Every environment variable rag_bot.settings reads: RAG_BOT_<FIELD> and each field's aliases."""
    names = set()
    for name, info in Settings.model_fields.items():
        names.add(f"RAG_BOT_{name.upper()}")
        if isinstance(info.validation_alias, AliasChoices):
            names.update(str(c) for c in info.validation_alias.choices)
    return names


def command_lines(script: str) -> list[str]:
    """The script's command lines: continuations joined, here-documents' bodies left out."""
    out, pending, heredoc = [], "", None
    for line in script.split("\n"):
        if heredoc is not None:
            heredoc = None if line.strip() == heredoc else heredoc
            continue
        pending += line
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        out.append(pending)
        m = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", pending)
        heredoc = m.group(1) if m else None
        pending = ""
    return out + ([pending] if pending else [])


def commands(line: str) -> list[list[str]]:
    """The simple commands of one line, as word lists (comments dropped, `a && b; c &` split)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    out: list[list[str]] = [[]]
    for word in lexer:
        if word in SEPARATORS:
            out.append([])
        else:
            out[-1].append(word)
    return [c for c in out if c]


def shell_problems(script: str, known: set[str]) -> list[str]:
    """What is wrong with a shell script a reader would paste (empty when it is right)."""
    parsed = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, timeout=10)
    if parsed.returncode:
        return [f"bash -n: {parsed.stderr.strip()}"]
    problems = []
    for line in command_lines(script):
        if line.lstrip().startswith("$ "):
            problems.append(f"a shell prompt pastes as a command: {line.strip()!r}")
            continue
        for words in commands(line):
            while words and ASSIGNMENT.match(words[0]):
                name = ASSIGNMENT.match(words[0]).group(1)  # type: ignore[union-attr]
                if name.startswith(("RAG_BOT_", "OPENAI_")) and name not in known:
                    problems.append(f"{name} is no setting of rag_bot.settings")
                words = words[1:]
            if not words:
                continue
            program = Path(words[0]).name
            if program == "export":
                problems += [f"{w.split('=')[0]} is no setting of rag_bot.settings" for w in words[1:]
                             if w.startswith(("RAG_BOT_", "OPENAI_")) and w.split("=")[0] not in known]
            elif program not in PROGRAMS:
                problems.append(f"runs {words[0]!r} (a comment without its '#'?): {line.strip()!r}")
            elif program == "rag-bot":
                problems += rag_bot_problems(words[1:])
    return problems


def rag_bot_problems(args: list[str]) -> list[str]:
    """What `rag-bot`'s own parser refuses in these arguments."""
    try:
        build_parser().parse_args(args)
    except SystemExit:
        return [f"rag-bot refuses: rag-bot {shlex.join(args)}"]
    return []


def problems_of(block: Block) -> list[str]:
    """What is wrong with one block (empty when it parses as its language says)."""
    text, language = block.text, block.language
    if language not in LANGUAGES:
        return [f"no known language ({language or 'none'}): give the block one of {sorted(LANGUAGES)}"]
    try:
        if language in SHELL:
            return shell_problems(text, known_variables())
        if language == "python":
            ast.parse(text)
        elif language == "json":
            json.loads(text)
        elif language == "toml":
            tomllib.loads(text)
        elif language == "yaml":
            yaml = pytest.importorskip("yaml")
            yaml.safe_load(text)
        elif language == "env":
            names = {ln.split("=", 1)[0] for ln in text.splitlines() if ln.strip() and not ln.startswith("#")}
            return [f"{n} is no setting of rag_bot.settings" for n in sorted(names - known_variables())]
    except (SyntaxError, ValueError) as exc:
        return [f"{language} does not parse: {exc}"]
    # A text block shows a session: its `$ …` lines are commands a reader will copy.
    shown = "\n".join(ln[2:] for ln in command_lines(text) if ln.startswith("$ "))
    return shell_problems(shown, known_variables()) if shown else []


@pytest.mark.parametrize("block", ALL, ids=str)
def test_every_code_block_of_the_docs_parses_as_its_language(block: Block):
    assert problems_of(block) == [], str(block)


def test_the_checks_catch_what_a_reader_would_trip_on():
    known = known_variables()
    assert "RAG_BOT_STORAGE" in known and "OPENAI_API_KEY" in known
    assert shell_problems(" OpenAI\nRAG_BOT_STORAGE=x .venv/bin/rag-bot ingest", known)  # comment without '#'
    assert shell_problems(" Ollama (`ollama pull x`)\n", known)  # bash -n fails
    assert shell_problems(".venv/bin/rag-bot ask --no-such-flag x", known)
    assert shell_problems("RAG_BOT_STORAGEE=x make run", known)
    assert shell_problems("$ rag-bot stats", known)
    assert not shell_problems("# OpenAI\nRAG_BOT_STORAGE=x .venv/bin/rag-bot ingest --quiet &\nwait", known)
    assert not shell_problems("cat > f <<'Y'\nnot a: command\nY\nmake run  # the chat", known)
    assert problems_of(Block(ROOT, 1, "", "x")) and problems_of(Block(ROOT, 1, "json", "{x}"))
    assert problems_of(Block(ROOT, 1, "text", '$ rag-bot ask --nope "q"\nanswer'))
