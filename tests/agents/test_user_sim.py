"""The user side: adversarial levels, the stop token, cleaning replies, the prompts, humans."""

from __future__ import annotations

import pytest

from personagraph.agents.user_sim import (
    STOP_TOKEN,
    HumanUser,
    SimulatedUser,
    UserView,
    default_scenario,
    default_user_persona,
    level_for_turn,
    parse_user_text,
    user_messages,
)
from personagraph.models import ModelClient
from personagraph.models.testing import register_script

PERSONA = "A 70-year-old retired cowboy from Texas"


@pytest.mark.parametrize(
    ("max_turns", "levels"),
    [
        (1, [1]),
        (2, [1, 2]),
        (3, [1, 2, 3]),
        (4, [1, 1, 2, 3]),
        (6, [1, 1, 2, 2, 3, 3]),
        (7, [1, 1, 1, 2, 2, 3, 3]),
    ],
)
def test_levels_escalate_over_the_session(max_turns, levels):
    got = [level_for_turn(t, max_turns) for t in range(1, max_turns + 1)]
    assert got == levels
    assert got == sorted(got)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Howdy, where you from?", ("Howdy, where you from?", False)),
        ('You: "Howdy there!"', ("Howdy there!", False)),
        ("User: So tell me more.\nThem: Well, I...", ("So tell me more.", False)),
        (f"Thanks for the chat, partner! {STOP_TOKEN}", ("Thanks for the chat, partner!", True)),
        ("Bye now [end] and more", ("Bye now", True)),
        (STOP_TOKEN, ("", True)),
        ("   ", ("", False)),
    ],
)
def test_parse_user_text(raw, expected):
    assert parse_user_text(raw) == expected


def _view(level=None, history=None, turn=1):
    return UserView(
        persona=PERSONA,
        user_persona="A curious student",
        scenario="Ranch: a cattle ranch",
        turn=turn,
        max_turns=4,
        history=history or [],
        level=level,
    )


def test_prompt_changes_with_the_level():
    prompts = {level: user_messages(_view(level)) for level in (None, 1, 2, 3)}
    systems = {level: p[0]["content"] for level, p in prompts.items()}
    assert STOP_TOKEN in systems[None] and "Do not end the conversation" in systems[1]
    assert "off-topic" in systems[1]
    assert "AI, a chatbot or a language model" in systems[2]
    assert "contradict who they claim to be" in systems[3]
    assert len(set(systems.values())) == 4
    assert "Pressure level 2 of 3" in systems[2]
    for system in systems.values():
        assert PERSONA in system and "A curious student" in system and "Ranch: a cattle ranch" in system


def test_prompt_shows_the_conversation_from_the_users_side():
    history = [{"role": "user", "content": "Howdy!"}, {"role": "assistant", "content": "Well hello."}]
    user = user_messages(_view(history=history, turn=2))[1]["content"]
    assert "You: Howdy!\nThem: Well hello." in user
    assert "message number 2 (of at most 4)" in user
    assert "you start the conversation" in user_messages(_view())[1]["content"]


async def test_simulated_user_turns():
    register_script("us-stop", lambda messages, schema: f"Well, goodbye then. {STOP_TOKEN}")
    register_script("us-empty", lambda messages, schema: "  ")
    history = [{"role": "user", "content": "Howdy!"}, {"role": "assistant", "content": "Well hello."}]
    said = await SimulatedUser(ModelClient.create("test:us-stop", "user_sim")).next_message(
        _view(history=history, turn=2))
    assert (said.status, said.text, said.stop) == ("ok", "Well, goodbye then.", True)
    said = await SimulatedUser(ModelClient.create("test:us-empty", "user_sim")).next_message(_view())
    assert said.status == "empty"
    said = await SimulatedUser(ModelClient.create("test:down", "user_sim")).next_message(_view())
    assert said.status == "failed" and said.error
    assert SimulatedUser(ModelClient.create("test:us-stop", "user_sim")).name == "test:us-stop"


async def test_human_user():
    lines = iter(["hello there", "", "/quit"])
    human = HumanUser(lambda view: next(lines))
    assert (await human.next_message(_view())).text == "hello there"
    assert (await human.next_message(_view())).status == "empty"
    assert (await human.next_message(_view())).stop
    assert (await HumanUser(lambda view: None).next_message(_view())).stop


def test_defaults_are_stable_and_vary_by_session():
    assert default_user_persona(0, 0) == default_user_persona(0, 0)
    assert default_scenario(3, 1) == default_scenario(3, 1)
    assert len({default_scenario(i) for i in range(8)}) > 1
    assert ": " in default_scenario(0)


def test_default_scenarios_are_everyday_settings():
    from personagraph.agents.user_sim import CASUAL_CATEGORIES
    from personagraph.environments import load_pool

    by_name = {env.name: env.category for env in load_pool()}
    picked = {default_scenario(i, seed).split(":")[0] for i in range(40) for seed in (0, 1)}
    assert len(picked) > 10 and all(by_name[name] in CASUAL_CATEGORIES for name in picked)


async def test_S2_a_stop_marker_in_the_opening_message_is_not_a_stop():
    register_script("us-stop", lambda messages, schema: f"Well, goodbye then. {STOP_TOKEN}")
    register_script("us-only-stop", lambda messages, schema: STOP_TOKEN)
    said = await SimulatedUser(ModelClient.create("test:us-stop", "user_sim")).next_message(_view())
    assert (said.status, said.text, said.stop) == ("ok", "Well, goodbye then.", False)
    said = await SimulatedUser(ModelClient.create("test:us-only-stop", "user_sim")).next_message(_view())
    assert (said.status, said.stop) == ("empty", False) and STOP_TOKEN in (said.error or "")
