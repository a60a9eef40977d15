"""Runnable plug-in agents for ``--agent examples.<module>:<attr>`` (run from the repository root).

They call the chat model named by ``PERSONAGRAPH_EXAMPLE_MODEL`` (any personagraph model spec; default
``local:qwen2.5-coder-0.5b``, the embedded model, so they run offline).
"""
