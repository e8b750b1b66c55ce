"""Write the ALFWorld ``demo`` split shipped in the package: six small games of our own.

The benchmark's game files stay out of the repository (they are data, installed with
``agentbench-rl data install alfworld``), so the games that let the engine be tried offline are
written here: one per task type, each a room of four or five receptacles and a few objects, in
the ``game.tw-pddl`` format of ALFWorld's games (a JSON object with ``pddl_domain``, ``grammar``,
``pddl_problem``, ``solvable`` and ``walkthrough``). The domain and grammar below are written for
these games: a subset of ALFWorld's action set (go, open, close, take, move, heat, cool, clean,
use, examine, look, inventory) with the same command templates and feedback sentences, so a
policy sees ALFWorld's interface; the rooms, objects and walkthroughs are made up. The tests
play each game on the native engine and on TextWorld's (the oracle) and require the same
transcript, and require the walkthrough to win.

    python envs/alfworld/build_demo.py           # write the games and manifest_demo.json
    python envs/alfworld/build_demo.py --check   # compare with the shipped files (exit 1: differ)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentbench_rl.envs.alfworld.data import (
    DATA_ROOT,
    GAME_FILE,
    GameRecord,
    SplitManifest,
    manifest_filename,
    sha256_bytes,
)

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "agentbench_rl" / "envs" / "alfworld"
DEMO_SPLIT = "demo"

DOMAIN = """\
;; The demo games' domain (agentbench-rl, envs/alfworld/build_demo.py): a subset of ALFWorld's
;; action set, written for six small rooms. Every receptacle stands at a location of its own.
(define (domain alfred)
 (:requirements :adl :action-costs :typing)
 (:types agent location receptacle object rtype otype)
 (:predicates
    (atLocation ?a - agent ?l - location)
    (receptacleAtLocation ?r - receptacle ?l - location)
    (objectAtLocation ?o - object ?l - location)
    (inReceptacle ?o - object ?r - receptacle)
    (receptacleType ?r - receptacle ?t - rtype)
    (objectType ?o - object ?t - otype)
    (canContain ?rt - rtype ?ot - otype)
    (openable ?r - receptacle)
    (opened ?r - receptacle)
    (checked ?r - receptacle)
    (holds ?a - agent ?o - object)
    (holdsAny ?a - agent)
    (pickupable ?o - object)
    (cleanable ?o - object)
    (isClean ?o - object)
    (heatable ?o - object)
    (isHot ?o - object)
    (coolable ?o - object)
    (isCool ?o - object)
    (toggleable ?o - object)
    (isOn ?o - object)
    (isToggled ?o - object)
 )
 (:functions (total-cost) - number)

 (:action look
    :parameters (?a - agent ?l - location)
    :precondition (and (atLocation ?a ?l))
    :effect (and (checked ?l)))

 (:action inventory
    :parameters (?a - agent)
    :precondition ()
    :effect (and (checked ?a)))

 (:action examineReceptacle
    :parameters (?a - agent ?r - receptacle)
    :precondition (exists (?l - location) (and (atLocation ?a ?l) (receptacleAtLocation ?r ?l)))
    :effect (and (checked ?r)))

 (:action examineObject
    :parameters (?a - agent ?o - object)
    :precondition (or
        (exists (?l - location ?r - receptacle)
            (and (atLocation ?a ?l) (receptacleAtLocation ?r ?l) (inReceptacle ?o ?r)
                 (or (not (openable ?r)) (opened ?r))))
        (holds ?a ?o))
    :effect (and (checked ?o)))

 (:action GotoLocation
    :parameters (?a - agent ?lStart - location ?lEnd - location ?r - receptacle)
    :precondition (and (atLocation ?a ?lStart) (receptacleAtLocation ?r ?lEnd))
    :effect (and (not (atLocation ?a ?lStart)) (atLocation ?a ?lEnd) (increase (total-cost) 1)))

 (:action OpenObject
    :parameters (?a - agent ?l - location ?r - receptacle)
    :precondition (and (openable ?r) (atLocation ?a ?l) (receptacleAtLocation ?r ?l)
                       (not (opened ?r)))
    :effect (and (opened ?r) (checked ?r) (increase (total-cost) 1)))

 (:action CloseObject
    :parameters (?a - agent ?l - location ?r - receptacle)
    :precondition (and (openable ?r) (atLocation ?a ?l) (receptacleAtLocation ?r ?l) (opened ?r))
    :effect (and (not (opened ?r)) (increase (total-cost) 1)))

 (:action PickupObject
    :parameters (?a - agent ?l - location ?o - object ?r - receptacle)
    :precondition (and (pickupable ?o) (atLocation ?a ?l) (receptacleAtLocation ?r ?l)
                       (inReceptacle ?o ?r) (not (holdsAny ?a))
                       (or (not (openable ?r)) (opened ?r)))
    :effect (and (not (inReceptacle ?o ?r)) (holds ?a ?o) (holdsAny ?a)
                 (not (objectAtLocation ?o ?l)) (increase (total-cost) 1)))

 (:action PutObject
    :parameters (?a - agent ?l - location ?o - object ?r - receptacle ?ot - otype ?rt - rtype)
    :precondition (and (holds ?a ?o) (atLocation ?a ?l) (receptacleAtLocation ?r ?l)
                       (or (not (openable ?r)) (opened ?r))
                       (objectType ?o ?ot) (receptacleType ?r ?rt) (canContain ?rt ?ot))
    :effect (and (inReceptacle ?o ?r) (objectAtLocation ?o ?l) (not (holds ?a ?o))
                 (not (holdsAny ?a)) (increase (total-cost) 1)))

 (:action CleanObject
    :parameters (?a - agent ?l - location ?r - receptacle ?o - object)
    :precondition (and (cleanable ?o) (receptacleType ?r SinkBasinType) (atLocation ?a ?l)
                       (receptacleAtLocation ?r ?l) (holds ?a ?o))
    :effect (and (isClean ?o) (increase (total-cost) 5)))

 (:action HeatObject
    :parameters (?a - agent ?l - location ?r - receptacle ?o - object)
    :precondition (and (heatable ?o) (receptacleType ?r MicrowaveType) (atLocation ?a ?l)
                       (receptacleAtLocation ?r ?l) (holds ?a ?o))
    :effect (and (isHot ?o) (not (isCool ?o)) (increase (total-cost) 5)))

 (:action CoolObject
    :parameters (?a - agent ?l - location ?r - receptacle ?o - object)
    :precondition (and (coolable ?o) (receptacleType ?r FridgeType) (atLocation ?a ?l)
                       (receptacleAtLocation ?r ?l) (holds ?a ?o))
    :effect (and (isCool ?o) (not (isHot ?o)) (increase (total-cost) 5)))

 (:action ToggleObject
    :parameters (?a - agent ?l - location ?o - object ?r - receptacle)
    :precondition (and (toggleable ?o) (atLocation ?a ?l) (receptacleAtLocation ?r ?l)
                       (inReceptacle ?o ?r))
    :effect (and (when (isOn ?o) (not (isOn ?o))) (when (not (isOn ?o)) (isOn ?o))
                 (isToggled ?o) (increase (total-cost) 5)))

 (:action help
    :parameters (?a - agent)
    :precondition ()
    :effect (and (checked ?a)))
)
"""

_IN_IT = "[{o.indefinite + ' ' + o.name | inreceptacle(o:object, r:receptacle)}]"
_HERE = "atlocation(a:agent, l:location) & receptacleatlocation(r:receptacle, l:location)"

#: The grammar's rules (TextWorld's text grammar: a symbol, then its alternatives, the first
#: whose condition holds is said). ``task`` is filled in per game.
RULES: dict[str, list[dict[str, str]]] = {
    "intro": [{"rhs": "-= Welcome to TextWorld, ALFRED! =-\n\n#look.feedback#\n\n#task#"}],
    "GotoLocation.feedback": [{"rhs": "You arrive at {r.name}. #examineReceptacle.feedback#"}],
    "OpenObject.feedback": [{"rhs": "You open the {r.name}. #examineReceptacle.feedback#"}],
    "CloseObject.feedback": [{"rhs": "You close the {r.name}."}],
    "PickupObject.feedback": [{"rhs": "You pick up the {o.name} from the {r.name}."}],
    "PutObject.feedback": [{"rhs": "You move the {o.name} to the {r.name}."}],
    "inventory.feedback": [
        {
            "condition": "holdsany(a:agent)",
            "rhs": "You are carrying: [{o.indefinite + ' ' + o.name | holds(a:agent, o:object)}].",
        },
        {"rhs": "You are not carrying anything."},
    ],
    "examineReceptacle.feedback": [
        {
            "condition": "openable(r:receptacle) & opened(r:receptacle)",
            "rhs": f"The {{r.name}} is open. In it, you see {_IN_IT}.",
        },
        {"condition": "openable(r:receptacle)", "rhs": "The {r.name} is closed."},
        {"rhs": f"On the {{r.name}}, you see {_IN_IT}."},
    ],
    "examineObject.feedback": [
        {"condition": "isclean(o:object)", "rhs": "This is a clean {o.name}."},
        {"condition": "ishot(o:object)", "rhs": "This is a hot {o.name}."},
        {"condition": "iscool(o:object)", "rhs": "This is a cold {o.name}."},
        {"condition": "toggleable(o:object) & istoggled(o:object)", "rhs": "This {o.name} is on."},
        {"condition": "toggleable(o:object)", "rhs": "This {o.name} is off."},
        {"rhs": "There's nothing special about {o.name}."},
    ],
    "toggleObject.feedback": [
        {"condition": "istoggled(o:object)", "rhs": "You turn on the {o.name}."},
        {"rhs": "You turn off the {o.name}."},
    ],
    "heatObject.feedback": [{"rhs": "You heat the {o.name} using the {r.name}."}],
    "cleanObject.feedback": [{"rhs": "You clean the {o.name} using the {r.name}."}],
    "coolObject.feedback": [{"rhs": "You cool the {o.name} using the {r.name}."}],
    "look.feedback": [
        {
            "condition": _HERE,
            "rhs": f"You are facing the [{{r.name | {_HERE}}}]. Next to it, you see nothing.",
        },
        {
            "rhs": "You are in the middle of a room. Looking quickly around you, you see "
            "[{r.indefinite + ' ' + r.name | receptacleatlocation(r:receptacle, l:location)}].",
        },
    ],
    "list_empty": [{"rhs": "nothing"}],
    "list_separator": [{"rhs": ", "}],
    "list_last_separator": [{"rhs": ", and "}],
}

#: Each action's command template and feedback (a rule above, or a text).
ACTIONS: dict[str, tuple[str, str]] = {
    "GotoLocation": (
        "go to [{r.name | receptacleatlocation(r:receptacle, lend:location)}]",
        "#GotoLocation.feedback#",
    ),
    "OpenObject": ("open {r}", "#OpenObject.feedback#"),
    "CloseObject": ("close {r}", "#CloseObject.feedback#"),
    "PickupObject": ("take {o} from {r}", "#PickupObject.feedback#"),
    "PutObject": ("move {o} to {r}", "#PutObject.feedback#"),
    "inventory": ("inventory", "#inventory.feedback#"),
    "examineReceptacle": ("examine {r}", "#examineReceptacle.feedback#"),
    "examineObject": ("examine {o}", "#examineObject.feedback#"),
    "ToggleObject": ("use {o}", "#toggleObject.feedback#"),
    "HeatObject": ("heat {o} with {r}", "#heatObject.feedback#"),
    "CleanObject": ("clean {o} with {r}", "#cleanObject.feedback#"),
    "CoolObject": ("cool {o} with {r}", "#coolObject.feedback#"),
    "look": ("look", "#look.feedback#"),
    "help": (
        "help",
        "Available commands: look, inventory, go to (receptacle), open (receptacle), close "
        "(receptacle), take (object) from (receptacle), move (object) to (receptacle), examine "
        "(something), use (object), heat (object) with (receptacle), clean (object) with "
        "(receptacle), cool (object) with (receptacle).",
    ),
}


def grammar(task: str) -> str:
    """The game's grammar text in TextWorld's format, its task sentence ``task``."""
    rules = {"task": [{"rhs": f"Your task is to: {task}"}], **RULES}
    lines = [f'grammar :: """\n{json.dumps(rules, indent=4)}\n""";']
    for name, (template, feedback) in ACTIONS.items():
        lines.append(f'\naction {name} {{\n    template :: "{template}";')
        lines.append(f'    feedback :: "{feedback}";\n}}')
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Receptacle:
    """A receptacle of a room: its type (``Drawer``) and whether it opens."""

    kind: str
    openable: bool = False

    @property
    def name(self) -> str:
        """Its PDDL name, as ALFWorld's games spell it (a basin carries its kind after the
        number: ``Sink_bar_1_bar_SinkBasin``, shown as ``sinkbasin 1``)."""
        if self.kind.endswith("Basin"):
            return f"{self.kind.removesuffix('Basin')}_bar_1_bar_{self.kind}"
        return f"{self.kind}_bar_1"


@dataclass(frozen=True)
class Item:
    """An object of a room: its type, the receptacle it starts in, and what can be done to it
    (``pickupable`` always; ``cleanable``, ``heatable``, ``coolable``, ``toggleable``)."""

    kind: str
    place: str
    abilities: tuple[str, ...] = ()


@dataclass(frozen=True)
class DemoGame:
    """One demo game: its task id, its room, its task sentence and goal, and a winning
    walkthrough (written by hand; the tests check that it wins on both engines)."""

    task_id: str
    receptacles: tuple[Receptacle, ...]
    items: tuple[Item, ...]
    task: str
    goal: str
    walkthrough: tuple[str, ...]

    def problem(self) -> str:
        """The game's PDDL problem: one location per receptacle (the agent starts at a location
        of its own), every object type placeable on every receptacle type of the room."""
        numbered_items = _numbered([item.kind for item in self.items])
        # each receptacle at a location of its own, by kind (one receptacle of a kind per room)
        location = {r.kind: f"loc_bar_{n}" for n, r in enumerate(self.receptacles, start=1)}
        name_of = {r.kind: r.name for r in self.receptacles}
        kinds = sorted({r.kind for r in self.receptacles} | {"SinkBasin", "Microwave", "Fridge"})
        otypes = sorted({item.kind for item in self.items})
        objects = [
            "agent1 - agent",
            "loc_bar_0 - location",
            *(f"{place} - location" for place in location.values()),
            *(f"{name} - receptacle" for name in name_of.values()),
            *(f"{name} - object" for name in numbered_items),
            *(f"{kind}Type - rtype" for kind in kinds),
            *(f"{kind}Type - otype" for kind in otypes),
        ]
        init = ["(atLocation agent1 loc_bar_0)"]
        for receptacle in self.receptacles:
            name = receptacle.name
            init.append(f"(receptacleAtLocation {name} {location[receptacle.kind]})")
            init.append(f"(receptacleType {name} {receptacle.kind}Type)")
            if receptacle.openable:
                init.append(f"(openable {name})")
            init.extend(f"(canContain {receptacle.kind}Type {kind}Type)" for kind in otypes)
        for item, name in zip(self.items, numbered_items, strict=True):
            init.append(f"(objectType {name} {item.kind}Type)")
            init.append(f"(inReceptacle {name} {name_of[item.place]})")
            init.append(f"(objectAtLocation {name} {location[item.place]})")
            init.append(f"(pickupable {name})")
            init.extend(f"({ability} {name})" for ability in item.abilities)
        lines = [
            f"(define (problem demo_{self.task_id.split('/')[0].replace('-', '_').lower()})",
            "(:domain alfred)",
            "(:objects",
            *(f"    {line}" for line in objects),
            ")",
            "(:init",
            *(f"    {line}" for line in init),
            ")",
            f"(:goal {self.goal})",
            ")",
        ]
        return "\n".join(lines) + "\n"

    def game_file(self) -> bytes:
        """The ``game.tw-pddl`` bytes (sorted keys, so the sha256 is stable)."""
        game = {
            "grammar": grammar(self.task),
            "pddl_domain": DOMAIN,
            "pddl_problem": self.problem(),
            "solvable": True,
            "walkthrough": list(self.walkthrough),
        }
        return (json.dumps(game, indent=1, sort_keys=True) + "\n").encode("utf-8")


def _numbered(kinds: Sequence[str]) -> list[str]:
    """PDDL names of objects, numbered per kind (``Mug_bar_1``, ``Mug_bar_2``)."""
    seen: dict[str, int] = {}
    names = []
    for kind in kinds:
        seen[kind] = seen.get(kind, 0) + 1
        names.append(f"{kind}_bar_{seen[kind]}")
    return names


def _placed(kind: str, receptacle: str, *conditions: str) -> str:
    """A goal: some object of ``kind`` in some receptacle of type ``receptacle``."""
    extra = "".join(f" ({condition} ?o)" for condition in conditions)
    return (
        f"(and (exists (?r - receptacle ?o - object) (and (objectType ?o {kind}Type)"
        f" (receptacleType ?r {receptacle}Type) (inReceptacle ?o ?r){extra})))"
    )


#: The six games, one per task type; a trial name that says they are made up.
DEMO_GAMES: tuple[DemoGame, ...] = (
    DemoGame(
        "look_at_obj_in_light-Pillow-None-DeskLamp-0/trial_demo",
        (
            Receptacle("Bed"),
            Receptacle("Desk"),
            Receptacle("SideTable"),
            Receptacle("Drawer", True),
        ),
        (
            Item("Pillow", "Bed"),
            Item("DeskLamp", "Desk", ("toggleable",)),
            Item("AlarmClock", "SideTable"),
            Item("KeyChain", "Drawer"),
        ),
        "look at pillow under the desklamp.",
        "(and (exists (?ot - object ?r - receptacle ?a - agent ?l - location) (and"
        " (objectType ?ot DeskLampType) (toggleable ?ot) (isToggled ?ot)"
        " (receptacleAtLocation ?r ?l) (atLocation ?a ?l) (inReceptacle ?ot ?r)))"
        " (exists (?o - object ?a - agent) (and (objectType ?o PillowType) (holds ?a ?o))))",
        ("go to bed 1", "take pillow 1 from bed 1", "go to desk 1", "use desklamp 1"),
    ),
    DemoGame(
        "pick_and_place_simple-Book-None-Sofa-0/trial_demo",
        (
            Receptacle("ArmChair"),
            Receptacle("Drawer", True),
            Receptacle("Shelf"),
            Receptacle("Sofa"),
        ),
        (Item("Book", "Drawer"), Item("Pillow", "Sofa"), Item("Vase", "Shelf")),
        "put a book in sofa.",
        _placed("Book", "Sofa"),
        (
            "go to drawer 1",
            "open drawer 1",
            "take book 1 from drawer 1",
            "go to sofa 1",
            "move book 1 to sofa 1",
        ),
    ),
    DemoGame(
        "pick_clean_then_place_in_recep-Cloth-None-Toilet-0/trial_demo",
        (
            Receptacle("Cabinet", True),
            Receptacle("CounterTop"),
            Receptacle("SinkBasin"),
            Receptacle("Toilet"),
        ),
        (Item("Cloth", "Cabinet", ("cleanable",)), Item("SoapBar", "CounterTop", ("cleanable",))),
        "put a clean cloth in toilet.",
        _placed("Cloth", "Toilet", "isClean"),
        (
            "go to cabinet 1",
            "open cabinet 1",
            "take cloth 1 from cabinet 1",
            "go to sinkbasin 1",
            "clean cloth 1 with sinkbasin 1",
            "go to toilet 1",
            "move cloth 1 to toilet 1",
        ),
    ),
    DemoGame(
        "pick_cool_then_place_in_recep-Apple-None-SideTable-0/trial_demo",
        (
            Receptacle("CounterTop"),
            Receptacle("Fridge", True),
            Receptacle("Microwave", True),
            Receptacle("SideTable"),
        ),
        (
            Item("Apple", "CounterTop", ("coolable", "heatable")),
            Item("Egg", "Fridge", ("coolable", "heatable")),
        ),
        "cool some apple and put it in sidetable.",
        _placed("Apple", "SideTable", "isCool"),
        (
            "go to countertop 1",
            "take apple 1 from countertop 1",
            "go to fridge 1",
            "cool apple 1 with fridge 1",
            "go to sidetable 1",
            "move apple 1 to sidetable 1",
        ),
    ),
    DemoGame(
        "pick_heat_then_place_in_recep-Mug-None-CoffeeMachine-0/trial_demo",
        (
            Receptacle("Cabinet", True),
            Receptacle("CoffeeMachine"),
            Receptacle("CounterTop"),
            Receptacle("Microwave", True),
        ),
        (
            Item("Mug", "Cabinet", ("heatable", "coolable")),
            Item("Bread", "CounterTop", ("heatable",)),
        ),
        "heat some mug and put it in coffeemachine.",
        _placed("Mug", "CoffeeMachine", "isHot"),
        (
            "go to cabinet 1",
            "open cabinet 1",
            "take mug 1 from cabinet 1",
            "go to microwave 1",
            "heat mug 1 with microwave 1",
            "go to coffeemachine 1",
            "move mug 1 to coffeemachine 1",
        ),
    ),
    DemoGame(
        "pick_two_obj_and_place-ToiletPaper-None-SideTable-0/trial_demo",
        (
            Receptacle("Cabinet", True),
            Receptacle("CounterTop"),
            Receptacle("SideTable"),
            Receptacle("Toilet"),
        ),
        (
            Item("ToiletPaper", "Toilet"),
            Item("ToiletPaper", "Cabinet"),
            Item("SoapBottle", "CounterTop"),
        ),
        "put two toiletpaper in sidetable.",
        "(and (exists (?r - receptacle ?o1 - object ?o2 - object) (and (not (= ?o1 ?o2))"
        " (objectType ?o1 ToiletPaperType) (objectType ?o2 ToiletPaperType)"
        " (receptacleType ?r SideTableType) (inReceptacle ?o1 ?r) (inReceptacle ?o2 ?r))))",
        (
            "go to toilet 1",
            "take toiletpaper 2 from toilet 1",
            "go to sidetable 1",
            "move toiletpaper 2 to sidetable 1",
            "go to cabinet 1",
            "open cabinet 1",
            "take toiletpaper 1 from cabinet 1",
            "go to sidetable 1",
            "move toiletpaper 1 to sidetable 1",
        ),
    ),
)


def demo_manifest() -> SplitManifest:
    """The ``demo`` split's manifest: every game's task id and sha256, sorted by task id.

    Example:
        >>> demo = demo_manifest()
        >>> demo.split, len(demo.games), demo.games[0].task_id
        ('demo', 6, 'look_at_obj_in_light-Pillow-None-DeskLamp-0/trial_demo')
    """
    games = sorted(DEMO_GAMES, key=lambda game: game.task_id)
    return SplitManifest(
        DEMO_SPLIT,
        tuple(
            GameRecord(DEMO_SPLIT, game.task_id, sha256_bytes(game.game_file())) for game in games
        ),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Write (or ``--check``) the demo games and their manifest; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=PACKAGE_DIR, help="the package folder")
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    manifest = demo_manifest()
    files = {
        args.out / "shipped" / DATA_ROOT / DEMO_SPLIT / game.task_id / GAME_FILE: game.game_file()
        for game in DEMO_GAMES
    }
    files[args.out / manifest_filename(DEMO_SPLIT)] = manifest.to_json().encode("utf-8")
    status = 0
    for path, data in files.items():
        if args.check:
            same = path.is_file() and path.read_bytes() == data
            status |= not same
            print(f"{path}: {'same' if same else 'DIFFERS'}")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            print(f"{path}: {len(data):,} bytes")
    return status


if __name__ == "__main__":
    sys.exit(main())
