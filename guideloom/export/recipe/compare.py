"""Why two recipes of a transform differ, and why a recipe cannot be trusted, in words."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from guideloom.export.recipe.values import same_scheme

logger = logging.getLogger(__name__)

MAX_NAMED = 3  # differing components a refusal names


def untrusted(slot: str, components: Mapping[str, str]) -> str | None:
    """Why an update cannot trust this recipe (``None``: it can): a value with no
    deterministic token, or code that reads the world, without a ``code_version``.

    ``transform 'x': value mymod.HANDLE (a socket) cannot be fingerprinted: pass
    code_version=`` or ``transform 'x': reads os.environ: pass code_version=``.
    """
    for key, what in sorted(components.items()):
        kind, _, name = key.partition(" ")
        if kind == "opaque":
            return f"{slot}: value {name} ({what}) cannot be fingerprinted: pass code_version="
        if kind == "stale":
            return (f"{slot}: {name}: {what} was edited after it was imported (the code that "
                    "runs is not its source): reload it or start anew, or pass code_version=")
    world = sorted(key.partition(" ")[2] for key in components if key.startswith("world "))
    if world:
        return f"{slot}: reads {' and '.join(world)}: pass code_version="
    return None


def differences(slot: str, old: Mapping[str, str], new: Mapping[str, str]) -> str | None:
    """What differs between the recorded and the new components of one transform, one phrase
    (``transform 'force': mymod.NORM.std changed, helpers.scale: source changed``)."""
    said: list[str] = []
    if old.get("name") != new.get("name"):
        said.append(f"is now {new.get('name')} (was {old.get('name')})")
    if old.get("code_version") != new.get("code_version"):
        said.append(f"code_version {old.get('code_version')!r} is now "
                    f"{new.get('code_version')!r}")
    for key in sorted(set(old) | set(new)):
        if key in ("name", "code_version") or old.get(key) == new.get(key):
            continue
        kind, _, name = key.partition(" ")
        if key not in old:
            said.append(f"{name}: newly used" if kind != "world" else f"now reads {name}")
        elif key not in new:
            said.append(f"{name}: no longer used" if kind != "world" else f"no longer reads {name}")
        elif kind == "code":
            said.append(f"{name}: source changed")
        elif kind == "package":
            said.append(f"{name}: version {old[key]} is now {new[key]}")
        elif kind == "value" and not same_scheme(old[key], new[key]):
            said.append(f"{name}: recorded by an older guideloom (hashed another way)")
        else:
            said.append(f"{name} changed")
    if not said:
        return None
    more = f" (and {len(said) - MAX_NAMED} more)" if len(said) > MAX_NAMED else ""
    return f"{slot}: {', '.join(said[:MAX_NAMED])}{more}"
