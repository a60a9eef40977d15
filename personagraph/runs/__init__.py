"""Run kinds: one module per kind (``eval``, ``simulate``, ``meta_eval``, ``judge_check``, ``persobench``,
``longlamp``, ``behavior``, ``memory_dialogue``), each a pydantic config, ``async def run(config, run_dir,
*, …) -> Summary`` and its sync twin ``run_sync``, all on the shared :class:`~personagraph.runs.base.Run`
context. Executors (where eval's persona units run) are in ``runs/executors``; plug-in agents are
loaded in ``runs/plugins.py``.
"""
