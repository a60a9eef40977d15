"""Embedded GGUF models run in process by llama.cpp (llama-cpp-python), as a LangChain chat model.

In process rather than a managed server: no port or child process to manage, start-up costs one model
load, and llama.cpp's prompt-prefix reuse works across calls on the same model. One inference runs at a
time across all embedded models (they share the machine's cores); callers wait in a worker thread so the
event loop stays free.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict

from personagraph.errors import PersonagraphError
from personagraph.models.spec import LOCAL_MODELS
from personagraph.models.weights import ensure_weights

N_CTX = int(os.environ.get("PERSONAGRAPH_N_CTX", "4096"))

_models: dict[str, Any] = {}
_load_lock = threading.Lock()
INFERENCE_LOCK = threading.Lock()


def load_llama(name: str) -> Any:
    """Returns the process-wide ``llama_cpp.Llama`` for an embedded model, loading it once."""
    with _load_lock:
        if name in _models:
            return _models[name]
        try:
            from llama_cpp import Llama
        except ImportError:
            raise PersonagraphError(
                f"local:{name} needs llama-cpp-python; install with: pip install 'personagraph[local]'"
            ) from None
        path = ensure_weights(LOCAL_MODELS[name])
        if not _models:
            atexit.register(close_models)
        _models[name] = Llama(
            model_path=str(path),
            n_ctx=N_CTX,
            n_threads=os.cpu_count() or 2,
            n_batch=512,
            seed=0,
            verbose=False,
        )
        return _models[name]


def close_models() -> None:
    """Frees every loaded model. Runs at exit: left to interpreter teardown, llama.cpp's own destructor
    finds its library already unloaded and prints a ``free_model`` traceback."""
    with _load_lock:
        while _models:
            _models.popitem()[1].close()


class LocalChatModel(BaseChatModel):
    """A LangChain chat model over an embedded llama.cpp model.

    Accepts ``response_format={"type": "json_object", "schema": {...}}`` per call, which llama.cpp turns
    into a grammar (schema-constrained decoding). Ranges such as minimum/maximum are not enforced by
    the grammar, so callers still validate.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model_name: str
    temperature: float = 0.0
    max_tokens: int = 256
    seed: int = 0

    @property
    def _llm_type(self) -> str:
        return "personagraph-llama-cpp"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name, "temperature": self.temperature, "max_tokens": self.max_tokens}

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        llama = load_llama(self.model_name)
        request: dict[str, Any] = {
            "messages": convert_to_openai_messages(messages),
            "temperature": kwargs.get("temperature", self.temperature),
            "max_tokens": kwargs.get("max_tokens", self.max_tokens),
            "seed": kwargs.get("seed", self.seed),
            "stop": stop,
        }
        if kwargs.get("response_format"):
            request["response_format"] = kwargs["response_format"]
        with INFERENCE_LOCK:
            reply = llama.create_chat_completion(**request)
        text = reply["choices"][0]["message"].get("content") or ""
        usage = reply.get("usage") or {}
        message = AIMessage(
            content=text,
            usage_metadata={
                "input_tokens": usage.get("prompt_tokens", 0),
                "output_tokens": usage.get("completion_tokens", 0),
                "total_tokens": usage.get("total_tokens", 0),
            },
            response_metadata={"finish_reason": reply["choices"][0].get("finish_reason")},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])
