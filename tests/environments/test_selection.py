"""Environment selection: constrained to the pool, and the embedding shortlist the selector is shown."""

from __future__ import annotations

import json
from typing import Any

import pytest

from personagraph.environments import load_pool, select_environments
from personagraph.environments.questions import shortlist_pool
from personagraph.models import ModelClient
from personagraph.models.testing import register_script


def test_pool_has_unique_names_in_known_categories() -> None:
    pool = load_pool()
    assert len(pool) >= 150
    assert len({env.name.lower() for env in pool}) == len(pool)
    assert {"social", "work", "travel", "sport", "art", "civic", "emergency", "rural"} <= {e.category for e in pool}


def test_shortlist_puts_the_persona_s_own_settings_first() -> None:
    cowboy = [env.name for env in shortlist_pool("A 70-year-old retired cowboy from Texas", 10)]
    nurse = [env.name for env in shortlist_pool("A pediatric nurse", 10)]
    assert len(cowboy) == 10 == len(set(cowboy))
    assert {"County Fair Rodeo", "Cattle Ranch Roundup", "Horse Stable"} & set(cowboy[:5])
    assert {"Vaccination Clinic", "Maternity Ward", "Kindergarten Classroom"} & set(nurse[:5])
    assert shortlist_pool("A pediatric nurse", 0) == load_pool()
    assert shortlist_pool("A pediatric nurse", 10_000) == load_pool()


@pytest.fixture
def shown() -> list[str]:
    """Records the environment listing the selector was shown (first call), and picks its first line plus
    a stranger, whatever it is asked (so the top-ups never make up the count)."""
    seen: list[str] = []

    def script(messages: list[dict[str, Any]], schema: dict[str, Any] | None) -> str:
        listing = messages[0]["content"]
        names = [line[2:].split(" (")[0] for line in listing.splitlines() if line.startswith("- ")]
        if len(messages) <= 2:
            seen.extend(names)
        return json.dumps({"environments": [names[0], "Moon Base Alpha", names[0]]})

    register_script("listing-selector", script)
    return seen


async def test_selector_sees_only_the_shortlist_and_unknown_names_are_dropped(shown: list[str]) -> None:
    client = ModelClient.create("test:listing-selector", "env_selector")
    selection = await select_environments(client, "A 70-year-old retired cowboy from Texas", 3, shortlist=12)
    assert len(shown) == 12 and selection.shortlist == shown
    assert [env.name for env in selection.environments] == [shown[0]]  # the duplicate is kept once
    assert selection.unknown == ["Moon Base Alpha"] * 4 and selection.status == "ok"
    assert (selection.requested, selection.shortfall, selection.extra_calls) == (3, 2, 3)  # recorded, not hidden


async def test_whole_pool_is_listed_without_a_shortlist(shown: list[str]) -> None:
    client = ModelClient.create("test:listing-selector", "env_selector")
    selection = await select_environments(client, "A pediatric nurse", 3)
    assert shown == [env.name for env in load_pool()] and selection.shortlist == []


@pytest.mark.parametrize("shortlist", [3, 2])
async def test_a_shortlist_no_longer_than_the_environments_wanted_needs_no_selector(
    shown: list[str], shortlist: int
) -> None:
    client = ModelClient.create("test:listing-selector", "env_selector")
    persona = "A 70-year-old retired cowboy from Texas"
    selection = await select_environments(client, persona, 3, shortlist=shortlist)
    nearest = [env.name for env in shortlist_pool(persona, 3)]
    assert [env.name for env in selection.environments] == nearest == selection.shortlist
    assert (selection.status, selection.shortfall, selection.extra_calls) == ("ok", 0, 0)
    assert shown == [] and client.meter.total_calls == 0  # nothing to choose: no call


async def test_a_short_selection_is_topped_up_in_the_same_conversation() -> None:
    asked: list[list[dict[str, Any]]] = []

    def script(messages: list[dict[str, Any]], schema: dict[str, Any] | None) -> str:
        asked.append(messages)
        names = [line[2:].split(" (")[0] for line in messages[0]["content"].splitlines() if line.startswith("- ")]
        return json.dumps({"environments": [names[0], "Moon Base Alpha"] if len(asked) == 1 else names[:3]})

    register_script("short-selector", script)
    selection = await select_environments(ModelClient.create("test:short-selector", "env_selector"), "A nurse", 3)
    assert len(selection.environments) == 3 and len({e.name for e in selection.environments}) == 3
    assert (selection.shortfall, selection.extra_calls, selection.status) == (0, 1, "ok")
    follow_up = asked[1][-1]["content"]
    assert asked[1][-2]["role"] == "assistant" and "Moon Base Alpha" in asked[1][-2]["content"]
    assert "1 usable of the 3" in follow_up and "not in the list: Moon Base Alpha" in follow_up and "2 more" in follow_up
