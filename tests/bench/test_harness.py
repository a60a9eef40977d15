"""bench/_harness.py: the machine line every bench prints."""

from bench._harness import cpu, machine


def test_the_cpu_line_carries_no_load_and_the_machine_line_adds_the_load_now() -> None:
    """A figure's closing line names the CPU beside its own start → end loads: a load labelled "at start"
    but read at the end would misdate it."""
    assert "load" not in cpu() and "AVX-512" in cpu()
    assert machine().startswith(f"machine: {cpu()}, load average ") and machine().endswith("(at start)")
