"""personagraph.redact: one scrubber for errors that are stored and lines that are printed."""

from personagraph.models import ModelClient, ModelSettings
from personagraph.models.client import Completion, Structured
from personagraph.redact import REDACTED, redact_text, register_secret


def test_a_model_error_is_scrubbed_when_it_is_made() -> None:
    body = 'HTTP 401: {"error": "Incorrect API key provided: sk-live-0123456789abcdefghij"}'
    assert "sk-live" not in Completion("failed", error=body).error
    assert Structured("failed", error=body).error.endswith(f"provided: {REDACTED}\"}}")


def test_a_key_given_to_a_client_is_redacted_whatever_its_shape() -> None:
    key = "plainkey-not-sk-shaped-42"
    assert redact_text(f"denied for {key}") == f"denied for {key}"
    ModelClient.create("openai:m", "persona", settings=ModelSettings(api_key=key, base_url="http://127.0.0.1:9/v1"))
    assert redact_text(f"denied for {key}") == f"denied for {REDACTED}"
    assert Completion("failed", error=f"echo {key}").error == f"echo {REDACTED}"


def test_short_values_are_not_registered() -> None:
    register_secret("abc")
    assert redact_text("abc abc") == "abc abc"
