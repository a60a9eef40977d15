"""The README's quick run on the embedded models, and a fresh install: wall time, peak memory, CPU.

Each measured command runs as a child process whose whole tree (personagraph and the llama-servers it
starts) is sampled from ``/proc``: the peak of the summed resident memory (RSS, ``status``, every 0.1 s)
of the tree, and of its proportional share (PSS: a page two processes map, such as a model file, counted
once; ``smaps_rollup``, every second). Reading ``smaps_rollup`` walks a process's page tables under its
memory lock: read every 0.1 s from servers that map gigabytes, it slows the run it measures
(docs/benchmarks.md#quick-run).

1. **quick run**: ``personagraph eval --persona … --quick`` in a fresh run directory, engines started
   afresh (start-up and model loading included): wall time, calls, answers cut at the token limit, and the
   CPU seconds each process used (a llama-server named by its model: where the time went). It
   reads the prompt prefixes earlier runs saved (``--prefixes kept``, as every run after a machine's
   first) or none (``--prefixes none``, as the first).
2. **meta-eval**: ``personagraph meta-eval`` with the default embedded judge on ``--meta-items`` replies of
   the USR dev file (the longest contexts first): wall time and memory.
3. **install** (``--install``, ~10 minutes): ``bash scripts/install.sh`` in a fresh copy of this checkout
   with an empty build cache, timed, and the bytes it wrote outside the virtualenv.

    .venv/bin/python bench/embedded.py [--persona "…"] [--meta-items 10] [--prefixes kept|none] [--install]

Every figure line carries the machine (``lscpu``'s model and flags of note) and the load average at its
start and end. Lines: ``quick_run_s <s> answers_cut <cut>/<answers> saved_prefixes <found>``,
``peak_rss_mb <quick run> <meta-eval>`` (tree), ``install_s <s>``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._harness import cpu, load_average, machine  # noqa: E402
from personagraph.models.prefixes import DIR_ENV as PREFIX_DIR_ENV  # noqa: E402
from personagraph.models.prefixes import SUFFIX, states_root  # noqa: E402

COWBOY = "A 70-year-old retired cowboy from Texas"
DEV = ROOT.parent / "shared" / "benchmarks" / "judge-dev"
PERSONAGRAPH = Path(sys.executable).with_name("personagraph")


def _tree(root: int) -> dict[int, list[str]]:
    """``root`` and every process descended from it, each with the fields of its ``/proc/<pid>/stat`` after
    the command name (its parent, its CPU times, …)."""
    stats: dict[int, list[str]] = {}
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                parent = int(fields[1])
            except (OSError, IndexError, ValueError):
                continue
            stats[int(entry.name)] = fields
            children.setdefault(parent, []).append(int(entry.name))
    out: dict[int, list[str]] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            out[pid] = stats[pid]
        todo.extend(children.get(pid, ()))
    return out


def _proc_kb(pid: int, name: str, key: str) -> int:
    """One ``key:`` of ``/proc/<pid>/<name>`` in kB; 0 when the process is gone. ``status``'s ``VmRSS`` is
    a kernel counter; ``smaps_rollup``'s ``Pss`` is a page walk (:data:`PSS_EVERY`)."""
    try:
        text = (Path("/proc") / str(pid) / name).read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) for line in text.splitlines() if line.startswith(f"{key}:")), 0)


SAMPLE_S = 0.1
PSS_EVERY = 10  # samples: PSS once a second


@dataclass
class Measured:
    wall_s: float = 0.0
    exit_code: int = 0
    peak_rss_mb: float = 0.0
    peak_pss_mb: float = 0.0
    largest: str = ""  # the process that held the most at the peak
    output: str = ""
    loads: tuple[str, str] = ("", "")
    samples: list[float] = field(default_factory=list)
    cpu_s: dict[str, float] = field(default_factory=dict)  # CPU seconds (user + system) by process kind

    def cpu_text(self) -> str:
        return ", ".join(f"{label} {seconds:.1f} s" for label, seconds in
                         sorted(self.cpu_s.items(), key=lambda item: -item[1]))


def _label(pid: int) -> str:
    """What a process is: its command name, and for a llama-server the model it serves; "" once it has
    ended (a zombie has no command line left)."""
    try:
        args = (Path("/proc") / str(pid) / "cmdline").read_bytes().decode(errors="replace").split("\0")
        name = (Path("/proc") / str(pid) / "comm").read_text().strip()
    except OSError:
        return ""
    if not args[0]:
        return ""
    if "--model" in args[:-1]:
        return f"{name} {Path(args[args.index('--model') + 1]).stem}"
    return name


def _cpu_s(stat: list[str]) -> float:
    """User + system CPU seconds a process has used so far, from its ``stat`` fields (:func:`_tree`)."""
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


def measure(command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> Measured:
    """Runs ``command``, sampling the memory of its process tree until it ends, and the CPU time each of its
    processes used (as last sampled: a process's last 0.1 s may be missing)."""
    out = Measured(loads=(load_average(), ""))
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=env, cwd=cwd)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout or ()), daemon=True)
    reader.start()
    sample = 0
    cpu: dict[int, tuple[str, float]] = {}
    while process.poll() is None:
        rss = pss = 0
        biggest = (0, "")
        with_pss = sample % PSS_EVERY == 0
        sample += 1
        for pid, stat in _tree(process.pid).items():
            r = _proc_kb(pid, "status", "VmRSS")
            # labelled again each time: the engine's launcher is Python until it execs llama-server, same pid
            cpu[pid] = (_label(pid) or (cpu[pid][0] if pid in cpu else "?"), _cpu_s(stat))
            rss, pss = rss + r, pss + (_proc_kb(pid, "smaps_rollup", "Pss") if with_pss else 0)
            if r > biggest[0]:
                try:
                    name = (Path("/proc") / str(pid) / "comm").read_text().strip()
                except OSError:
                    name = "?"
                biggest = (r, f"{name} {r / 1024:.0f} MB")
        if rss / 1024 > out.peak_rss_mb:
            out.peak_rss_mb, out.largest = rss / 1024, biggest[1]
        out.peak_pss_mb = max(out.peak_pss_mb, pss / 1024)
        time.sleep(SAMPLE_S)
    reader.join(10)
    out.wall_s = time.perf_counter() - started
    out.exit_code = process.returncode
    out.output = "".join(lines)
    for label, used in cpu.values():
        out.cpu_s[label] = out.cpu_s.get(label, 0.0) + used
    out.loads = (out.loads[0], load_average())
    return out


def _env(cache: Path | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if cache is not None:
        env["PERSONAGRAPH_CACHE_DIR"] = str(cache)
    return env


def quick_run(work: Path, persona: str, prefixes: str) -> Measured:
    """``prefixes``: "kept" reads the saved prompt prefixes earlier runs left (personagraph.models.prefixes),
    "none" starts from an empty folder, as the first run on a machine does."""
    env = _env()
    if prefixes == "none":
        env[PREFIX_DIR_ENV] = str(work / "prefix-states")
    return measure([str(PERSONAGRAPH), "eval", "--persona", persona, "--quick", "--run-dir",
                    str(work / "quick")], env=env)


def saved_prefixes(prefixes: str) -> int:
    """How many saved prompt prefixes a run with ``--prefixes kept`` finds."""
    if prefixes == "none":
        return 0
    return sum(1 for _ in states_root().glob(f"*/*{SUFFIX}"))


def answers_cut(run_dir: Path) -> str:
    """``cut/answers`` of a finished eval: answers the token limit stopped, of all answers."""
    try:
        models = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))["models"].values()
    except (OSError, ValueError, KeyError):
        return "unknown (no summary)"
    return f"{sum(m['answers_at_token_limit'] for m in models)}/{sum(m['answers'] for m in models)}"


def meta_eval(work: Path, items: int) -> Measured:
    """The default embedded judge on the ``items`` USR replies with the longest contexts."""
    rows = [json.loads(line) for line in (DEV / "usr_overall.jsonl").read_text(encoding="utf-8").splitlines()]
    rows.sort(key=lambda r: -len(r["persona"]) - len(r["question"]))
    path = work / "items.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[:items]), encoding="utf-8")
    return measure([str(PERSONAGRAPH), "meta-eval", "--items", str(path), "--run-dir", str(work / "meta")],
                   env=_env())


def install(work: Path) -> tuple[Measured, int]:
    """``bash scripts/install.sh`` in a fresh copy of the tracked files, with an empty build cache; the bytes
    written outside the virtualenv (the cache: assembled weights, the build)."""
    copy, cache = work / "checkout", work / "cache"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        target = copy / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    measured = measure(["bash", "scripts/install.sh"], env=_env(cache), cwd=copy)
    written = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file() and not p.is_symlink())
    return measured, written


def _line(label: str, m: Measured) -> str:
    return (f"  {label}: {m.wall_s:.1f} s, exit {m.exit_code}, peak RSS {m.peak_rss_mb:.0f} MB over the "
            f"process tree (PSS {m.peak_pss_mb:.0f} MB; largest {m.largest}), CPU {m.cpu_text()}, "
            f"load {m.loads[0]} → {m.loads[1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persona", default=COWBOY)
    parser.add_argument("--meta-items", type=int, default=10, help="USR replies for the meta-eval (0: skip)")
    parser.add_argument("--prefixes", choices=["kept", "none"], default="kept",
                        help="prompt prefixes the quick run reads: those earlier runs saved, or none")
    parser.add_argument("--install", action="store_true", help="also time a fresh install (~10 minutes)")
    args = parser.parse_args()
    print(machine(), flush=True)
    with tempfile.TemporaryDirectory(prefix="pg-bench-embedded-") as tmp:
        work = Path(tmp)
        found = saved_prefixes(args.prefixes)
        quick = quick_run(work, args.persona, args.prefixes)
        cut = answers_cut(work / "quick")
        print(_line("quick run", quick), flush=True)
        tail = [line for line in quick.output.splitlines() if line.strip()][-12:]
        print("\n".join(f"    | {line}" for line in tail), flush=True)
        meta = meta_eval(work, args.meta_items) if args.meta_items else None
        if meta is not None:
            print(_line(f"meta-eval, {args.meta_items} USR replies", meta), flush=True)
        installed = install(work) if args.install else None
        if installed is not None:
            print(_line("install", installed[0]) + f"; {installed[1] / 1e9:.2f} GB written outside the venv",
                  flush=True)
    print(f"quick_run_s {quick.wall_s:.1f} answers_cut {cut} saved_prefixes {found} (exit {quick.exit_code}; "
          f"machine: {cpu()}; load {quick.loads[0]} → {quick.loads[1]})")
    print(f"peak_rss_mb {quick.peak_rss_mb:.0f} {meta.peak_rss_mb if meta else float('nan'):.0f} "
          f"(quick run, meta-eval; summed over the process tree; load {load_average()})")
    if installed is not None:
        done = installed[0]
        print(f"install_s {done.wall_s:.0f} written_gb {installed[1] / 1e9:.2f} (exit {done.exit_code}; "
              f"machine: {cpu()}; load {done.loads[0]} → {done.loads[1]})")


if __name__ == "__main__":
    main()
