"""The PDDL that ALFWorld's games are written in: reading, grounding and playing it.

Each ``game.tw-pddl`` holds a domain (the ALFRED action schemas, ADL with action costs) and a
problem (objects, initial facts, goal). This module reads both and plays them as
fast-downward's translator and TextWorld's ``PddlState`` do, which is what the native engine
must equal fact for fact:

* Names are lower-cased (fast-downward's reader does so), and a declared type ``object`` is
  the root every other type descends from, so a parameter ``?o - object`` ranges over every
  object of the problem.
* A state is the set of facts TextWorld holds: the problem's initial atoms, then, for every
  effect an applied action fires, the atom added and its ``not_`` twin removed (an add) or the
  atom removed and ``not_<atom>`` added (a delete). So a ``not_`` fact exists only once some
  action has deleted the atom, and grammar conditions read it (``not_inreceptacle``).
* An action is applicable when its precondition holds; conditional effects are decided on the
  state before the action; the deletes are applied before the adds.
* Actions are grounded once per game on their static preconditions (predicates no effect
  changes), and indexed by the location their ``atLocation`` precondition names, so a step
  checks only the actions that could apply where the agent stands.

A hand-written reader, since no maintained Python PDDL library reads this ADL subset and also
evaluates it against TextWorld's fact representation (fast-downward's translator grounds to
SAS, which loses the ``not_`` bookkeeping the texts read).

Example:
    >>> domain = parse_domain(game["pddl_domain"])  # doctest: +SKIP
    >>> problem = parse_problem(game["pddl_problem"])  # doctest: +SKIP
    >>> sorted(domain.actions)[:2]  # doctest: +SKIP
    ['cleanobject', 'closeobject']
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

#: A ground fact: the predicate's name then its arguments, e.g. ``("opened", "drawer_bar_...")``.
Fact = tuple[str, ...]
#: An S-expression: a name or a list of them.
SExpr = str | list["SExpr"]
#: A key of a state's indexes: a predicate, or (predicate, argument position, object).
IndexKey = TypeVar("IndexKey", str, tuple[str, int, str])

ROOT_TYPE = "object"
EQUALS = "="
#: Answers :meth:`World.applicable` remembers per world (it starts afresh when full).
MEMO_ENTRIES = 50_000
#: The key :meth:`World.goal_holds` files its answers under (no schema is named so).
GOAL = ":goal"


class PddlError(ValueError):
    """A game file whose PDDL this reader cannot read."""


# ---------------------------------------------------------------------- S-expressions
_COMMENT = re.compile(r";[^\r\n]*")


def read_sexpr(text: str) -> SExpr:
    """The first S-expression of ``text``, comments (``;`` to the end of a line) left out.

    Example:
        >>> read_sexpr("(and (a ?x) ; note\\n (not (b)))")
        ['and', ['a', '?x'], ['not', ['b']]]
    """
    # str.replace and str.split run in C: twice as fast as a regex tokenizer on a game's problem
    uncommented = _COMMENT.sub("", text).lower()
    tokens = uncommented.replace("(", " ( ").replace(")", " ) ").split()
    stack: list[list[SExpr]] = [[]]
    for token in tokens:
        if token == "(":
            stack.append([])
        elif token == ")":
            if len(stack) == 1:
                raise PddlError("pddl: a ')' closes nothing")
            done = stack.pop()
            stack[-1].append(done)
            if len(stack) == 1:
                return done
        else:
            stack[-1].append(token)
    raise PddlError("pddl: unbalanced parentheses")


def _typed_names(items: Sequence[SExpr]) -> list[tuple[str, str]]:
    """``a b - t c - u`` as [(a, t), (b, t), (c, u)]; names without a type are ``object``."""
    typed: list[tuple[str, str]] = []
    pending: list[str] = []
    index = 0
    while index < len(items):
        item = items[index]
        if item == "-":
            type_ = items[index + 1]
            if not isinstance(type_, str):
                raise PddlError(f"pddl: 'either' types are not supported: {type_}")
            typed += [(name, type_) for name in pending]
            pending = []
            index += 2
            continue
        if not isinstance(item, str):
            raise PddlError(f"pddl: expected a name, got {item}")
        pending.append(item)
        index += 1
    return typed + [(name, ROOT_TYPE) for name in pending]


def _sections(expr: SExpr) -> dict[str, list[SExpr]]:
    if not isinstance(expr, list) or not expr or expr[0] != "define":
        raise PddlError("pddl: expected (define ...)")
    sections: dict[str, list[SExpr]] = {}
    for part in expr[1:]:
        if isinstance(part, list) and part and isinstance(part[0], str):
            sections[part[0]] = part[1:]
    return sections


# ---------------------------------------------------------------------- formulas
@dataclass(frozen=True)
class Atom:
    """``(pred t1 t2 ...)``; a term is a ``?variable`` or an object name."""

    predicate: str
    terms: tuple[str, ...]


@dataclass(frozen=True)
class Not:
    formula: Formula


@dataclass(frozen=True)
class And:
    parts: tuple[Formula, ...]


@dataclass(frozen=True)
class Or:
    parts: tuple[Formula, ...]


@dataclass(frozen=True)
class Exists:
    variables: tuple[tuple[str, str], ...]
    formula: Formula


@dataclass(frozen=True)
class Forall:
    variables: tuple[tuple[str, str], ...]
    formula: Formula


Formula = Atom | Not | And | Or | Exists | Forall


def parse_formula(expr: SExpr) -> Formula:
    """A precondition or goal as a :data:`Formula` (``()`` is the empty conjunction).

    Example:
        >>> parse_formula(read_sexpr("(or (not (openable ?r)) (opened ?r))")).parts[1]
        Atom(predicate='opened', terms=('?r',))
    """
    if not isinstance(expr, list):
        raise PddlError(f"pddl: expected a formula, got {expr!r}")
    if not expr:
        return And(())
    head, *rest = expr
    if head == "and":
        return And(tuple(parse_formula(part) for part in rest))
    if head == "or":
        return Or(tuple(parse_formula(part) for part in rest))
    if head == "not":
        return Not(parse_formula(rest[0]))
    if head == "imply":
        return Or((Not(parse_formula(rest[0])), parse_formula(rest[1])))
    if head in ("exists", "forall"):
        variables = _variables(rest[0])
        body = parse_formula(rest[1])
        return Exists(variables, body) if head == "exists" else Forall(variables, body)
    if not isinstance(head, str) or any(not isinstance(term, str) for term in rest):
        raise PddlError(f"pddl: cannot read the formula {expr}")
    return Atom(head, tuple(str(term) for term in rest))


def _variables(expr: SExpr) -> tuple[tuple[str, str], ...]:
    """A typed parameter list. As fast-downward reads it, a comma is part of the name before
    it: ALFWorld's ``(exists (?l - location, ?r - receptacle) ...)`` gives ``?l`` the type
    ``location,``, which no object has, so that branch of ``examineObject`` never holds and an
    object can be examined only while held (TextWorld's games play so)."""
    if not isinstance(expr, list):
        raise PddlError(f"pddl: expected a parameter list, got {expr!r}")
    return tuple(_typed_names(expr))


@dataclass(frozen=True)
class Effect:
    """One literal an action sets, under a condition (``when``) and for each binding of
    ``forall`` variables."""

    variables: tuple[tuple[str, str], ...]
    condition: Formula
    atom: Atom
    delete: bool


def parse_effects(expr: SExpr) -> tuple[list[Effect], int]:
    """The literals of an action's effect and its cost (``increase (total-cost) n``)."""
    effects: list[Effect] = []
    cost = 0

    def walk(node: SExpr, variables: tuple[tuple[str, str], ...], condition: Formula) -> None:
        nonlocal cost
        if not isinstance(node, list) or not node:
            return
        head = node[0]
        if head == "and":
            for part in node[1:]:
                walk(part, variables, condition)
        elif head == "when":
            walk(node[2], variables, _conjoin(condition, parse_formula(node[1])))
        elif head == "forall":
            walk(node[2], variables + _variables(node[1]), condition)
        elif head == "increase":
            amount = node[2]
            if isinstance(amount, str) and amount.isdigit():
                cost += int(amount)
        elif head == "not":
            atom = parse_formula(node[1])
            if not isinstance(atom, Atom):
                raise PddlError(f"pddl: a delete effect must be an atom: {node}")
            effects.append(Effect(variables, condition, atom, True))
        else:
            atom = parse_formula(node)
            if not isinstance(atom, Atom):
                raise PddlError(f"pddl: cannot read the effect {node}")
            effects.append(Effect(variables, condition, atom, False))

    walk(expr, (), And(()))
    return effects, cost


def _conjoin(first: Formula, second: Formula) -> Formula:
    if isinstance(first, And) and not first.parts:
        return second
    return And((first, second))


# ---------------------------------------------------------------------- domain, problem
@dataclass(frozen=True)
class ActionSchema:
    """One ``(:action ...)``: its typed parameters, precondition, effects and cost."""

    name: str
    parameters: tuple[tuple[str, str], ...]
    precondition: Formula
    effects: tuple[Effect, ...]
    cost: int

    def __hash__(self) -> int:  # the name and parameters suffice; the formulas are deep
        return hash((self.name, self.parameters))


@dataclass(frozen=True)
class Domain:
    """A PDDL domain: types (child -> parent) and action schemas, in file order."""

    name: str
    types: dict[str, str]
    actions: dict[str, ActionSchema]

    def subtypes(self, type_: str) -> frozenset[str]:
        """``type_`` and every type that descends from it (every type, for the root)."""
        if type_ == ROOT_TYPE:
            return frozenset({ROOT_TYPE, *self.types})
        found = {type_}
        changed = True
        while changed:
            changed = False
            for child, parent in self.types.items():
                if parent in found and child not in found:
                    found.add(child)
                    changed = True
        return frozenset(found)


def parse_domain(text: str) -> Domain:
    """Read a PDDL domain (the ADL subset the ALFRED domain uses)."""
    expr = read_sexpr(text)
    sections = _sections(expr)
    name = str(sections.get("domain", ["?"])[0])
    types = {child: parent for child, parent in _typed_names(sections.get(":types", []))}
    types.pop(ROOT_TYPE, None)  # a declared ``object`` is the root itself
    actions: dict[str, ActionSchema] = {}
    assert isinstance(expr, list)
    for part in expr[1:]:
        if not (isinstance(part, list) and part and part[0] == ":action"):
            continue
        fields = dict(zip(part[2::2], part[3::2], strict=False))
        effects, cost = parse_effects(fields.get(":effect", []))
        schema = ActionSchema(
            name=str(part[1]),
            parameters=_variables(fields.get(":parameters", [])),
            precondition=parse_formula(fields.get(":precondition", [])),
            effects=tuple(effects),
            cost=cost,
        )
        actions[schema.name] = schema
    return Domain(name, types, actions)


@dataclass(frozen=True)
class Problem:
    """A PDDL problem: typed objects, the initial atoms and the goal."""

    name: str
    objects: dict[str, str]
    init: tuple[Fact, ...]
    goal: Formula


def parse_problem(text: str) -> Problem:
    """Read a PDDL problem; numeric ``(= (f ...) n)`` initial values are left out (TextWorld
    keeps no fact for them)."""
    sections = _sections(read_sexpr(text))
    name = str(sections.get("problem", ["?"])[0])
    objects = dict(_typed_names(sections.get(":objects", [])))
    init: list[Fact] = []
    for item in sections.get(":init", []):
        if not isinstance(item, list) or not item or item[0] == EQUALS:
            continue
        if not all(isinstance(term, str) for term in item):
            raise PddlError(f"pddl: cannot read the initial fact {item}")
        init.append(cast(Fact, tuple(item)))  # its terms are str, checked above
    goal_items = sections.get(":goal", [])
    goal = parse_formula(goal_items[0]) if goal_items else And(())
    return Problem(name, objects, tuple(init), goal)


# ---------------------------------------------------------------------- states
class State:
    """A set of facts, indexed for the queries of formulas and grammar conditions: by
    predicate, and by (predicate, argument position, object)."""

    __slots__ = ("_owned", "by_argument", "by_predicate", "facts", "mix", "mixes")

    def __init__(self, facts: Iterable[Fact]) -> None:
        self.facts: set[Fact] = set()
        self.by_predicate: dict[str, set[Fact]] = {}
        self.by_argument: dict[tuple[str, int, str], set[Fact]] = {}
        self.mix = 0  # the XOR of the facts' hashes, kept as facts come and go
        self.mixes: dict[str, int] = {}  # the same per predicate
        # The index sets this state may change in place: all (None) until it is copied, then
        # those it has made its own since (the copies share the others: copy on write).
        self._owned: set[object] | None = None
        for fact in facts:
            self.add(fact)

    def copy(self) -> State:
        """An independent copy. The two share their index sets until either changes one, so a
        reset's copy of a game's initial state copies references, not a thousand sets.

        Example:
            >>> state = State([("p", "x")])
            >>> copy = state.copy()
            >>> copy.add(("p", "y")); state.discard(("p", "x"))
            >>> sorted(copy.matching("p", [None])), sorted(state.matching("p", [None]))
            ([('p', 'x'), ('p', 'y')], [])
        """
        copy = State(())
        copy.facts = set(self.facts)
        copy.by_predicate = dict(self.by_predicate)
        copy.by_argument = dict(self.by_argument)
        copy.mix = self.mix
        copy.mixes = dict(self.mixes)
        self._owned, copy._owned = set(), set()
        return copy

    def _own(self, index: dict[IndexKey, set[Fact]], key: IndexKey) -> set[Fact]:
        """``index[key]``, this state's own to change (copied first where it is shared)."""
        found = index.get(key)
        owned = self._owned
        if found is None or (owned is not None and key not in owned):
            found = index[key] = set() if found is None else set(found)
            if owned is not None:
                owned.add(key)
        return found

    def predicate_key(self, predicate: str) -> tuple[int, int]:
        """:meth:`key` of the facts of one predicate."""
        return self.mixes.get(predicate, 0), len(self.by_predicate.get(predicate, ()))

    def key(self) -> tuple[int, int]:
        """A key of the set of facts, in O(1): equal sets have equal keys, and unequal sets
        almost never do (a cache keyed by it compares the facts on a hit). Valid within this
        process only (Python's string hashes are salted per process).

        Example:
            >>> a, b = State([("p", "x")]), State([("q", "y")])
            >>> b.add(("p", "x")); b.discard(("q", "y"))
            >>> a.key() == b.key()
            True
        """
        return self.mix, len(self.facts)

    def add(self, fact: Fact) -> None:
        if fact not in self.facts:
            self.facts.add(fact)
            mixed = hash(fact)
            self.mix ^= mixed
            self.mixes[fact[0]] = self.mixes.get(fact[0], 0) ^ mixed
            self._own(self.by_predicate, fact[0]).add(fact)
            for position, value in enumerate(fact[1:]):
                self._own(self.by_argument, (fact[0], position, value)).add(fact)

    def discard(self, fact: Fact) -> None:
        if fact in self.facts:
            self.facts.discard(fact)
            mixed = hash(fact)
            self.mix ^= mixed
            self.mixes[fact[0]] ^= mixed
            self._own(self.by_predicate, fact[0]).discard(fact)
            for position, value in enumerate(fact[1:]):
                self._own(self.by_argument, (fact[0], position, value)).discard(fact)

    def matching(self, predicate: str, terms: Sequence[str | None]) -> Iterable[Fact]:
        """The facts of ``predicate`` that agree with the bound terms (None: any)."""
        for position, value in enumerate(terms):
            if value is not None:
                return self.by_argument.get((predicate, position, value), ())
        return self.by_predicate.get(predicate, ())

    def __contains__(self, fact: object) -> bool:
        return fact in self.facts


NEGATION = "not_"


def negated(fact: Fact) -> Fact:
    """TextWorld's twin of a fact: ``not_<predicate>`` with the same arguments."""
    return (NEGATION + fact[0], *fact[1:])


# ---------------------------------------------------------------------- evaluation
Binding = dict[str, str]


class World:
    """A problem over its domain: object types, static facts and formula evaluation."""

    def __init__(self, domain: Domain, problem: Problem, domain_text: str = "") -> None:
        self.domain = domain
        self.domain_text = domain_text
        self.problem = problem
        self.objects = dict(problem.objects)
        changed = {effect.atom.predicate for a in domain.actions.values() for effect in a.effects}
        self.static_predicates = frozenset(
            {fact[0] for fact in problem.init if fact[0] not in changed}
        )
        self._objects_of: dict[str, tuple[str, ...]] = {}
        self._object_sets: dict[str, frozenset[str]] = {}
        self._variants: dict[str, list[Exists]] = {}
        # applicable() per schema and per state of the facts its precondition reads (the
        # facts of its predicates that actions change; the static ones are the world's own)
        self._read_by: dict[str, tuple[str, ...]] = {}
        self._applicable: dict[Any, tuple[tuple[frozenset[Fact], ...], list[tuple[str, ...]]]]
        self._applicable = {}
        self._goal: dict[Any, tuple[tuple[frozenset[Fact], ...], bool]] = {}
        self.remembers = True

    def objects_of(self, type_: str) -> tuple[str, ...]:
        """Every object whose type is ``type_`` or descends from it, sorted."""
        found = self._objects_of.get(type_)
        if found is None:
            types = self.domain.subtypes(type_)
            if type_ == ROOT_TYPE:
                found = tuple(sorted(self.objects))
            else:
                found = tuple(sorted(o for o, t in self.objects.items() if t in types))
            self._objects_of[type_] = found
        return found

    def _object_set(self, type_: str) -> frozenset[str]:
        found = self._object_sets.get(type_)
        if found is None:
            found = self._object_sets[type_] = frozenset(self.objects_of(type_))
        return found

    def holds(self, formula: Formula, state: State, binding: Binding) -> bool:
        """Whether ``formula`` is true in ``state`` under ``binding`` (``?x`` -> object)."""
        if isinstance(formula, Atom):
            terms = tuple(binding.get(t, t) for t in formula.terms)
            if formula.predicate == EQUALS:
                return terms[0] == terms[1]
            return (formula.predicate, *terms) in state.facts
        if isinstance(formula, And):
            return all(self.holds(part, state, binding) for part in formula.parts)
        if isinstance(formula, Or):
            return any(self.holds(part, state, binding) for part in formula.parts)
        if isinstance(formula, Not):
            return not self.holds(formula.formula, state, binding)
        if isinstance(formula, Exists):
            return any(True for _ in self.solutions(merged_exists(formula), state, binding))
        if isinstance(formula, Forall):
            names = [name for name, _ in formula.variables]
            domains = [self.objects_of(type_) for _, type_ in formula.variables]
            for values in itertools.product(*domains):
                inner = {**binding, **dict(zip(names, values, strict=True))}
                if not self.holds(formula.formula, state, inner):
                    return False
            return True
        raise PddlError(f"pddl: unknown formula {formula!r}")

    def solutions(self, formula: Exists, state: State, binding: Binding) -> Iterator[Binding]:
        """Bindings of an ``exists`` formula's variables that make its body true.

        The positive atoms of the body's conjunction bind variables from the state's facts,
        the atom with the fewest matching facts first; every other part is checked as soon as
        its variables are bound; variables no atom binds range over their type.
        """
        parts = _conjuncts(formula.formula)
        atoms = [p for p in parts if isinstance(p, Atom) and p.predicate != EQUALS]
        # each other part with its free variables, worked out here once rather than at every
        # level of the search (a formula's hash walks its whole tree)
        rest = [
            (p, free_variables(p))
            for p in parts
            if not (isinstance(p, Atom) and p.predicate != EQUALS)
        ]
        wanted = dict(formula.variables)
        yield from self._extend(atoms, rest, wanted, dict(binding), state)

    def _extend(
        self,
        atoms: list[Atom],
        rest: list[tuple[Formula, frozenset[str]]],
        wanted: dict[str, str],
        current: Binding,
        state: State,
    ) -> Iterator[Binding]:
        pending = []
        for part, variables in rest:
            if variables <= current.keys():
                if not self.holds(part, state, current):
                    return
            else:
                pending.append((part, variables))
        if not atoms:
            free = [name for name in wanted if name not in current]
            for values in itertools.product(*(self.objects_of(wanted[n]) for n in free)):
                full = {**current, **dict(zip(free, values, strict=True))}
                if all(self.holds(p, state, full) for p, _ in pending):
                    yield full
            return
        best, candidates = 0, None
        for index, atom in enumerate(atoms):
            bound = [current.get(t) if t.startswith("?") else t for t in atom.terms]
            found = state.matching(atom.predicate, bound)
            if candidates is None or len(found) < len(candidates):  # type: ignore[arg-type]
                best, candidates = index, found
        atom = atoms[best]
        others = atoms[:best] + atoms[best + 1 :]
        for fact in list(candidates or ()):
            if len(fact) != len(atom.terms) + 1:
                continue
            added = dict(current)
            for term, value in zip(atom.terms, fact[1:], strict=True):
                known = added.get(term, term if not term.startswith("?") else None)
                if known is None:
                    if term in wanted and value not in self._object_set(wanted[term]):
                        break
                    added[term] = value
                elif known != value:
                    break
            else:
                yield from self._extend(others, pending, wanted, added, state)

    def groundings(self, effect: Effect, binding: Binding) -> Iterator[tuple[Binding, Fact]]:
        """The atom ``effect`` sets under ``binding``, once per value of its ``forall``
        variables (each over its type), with the binding that includes them."""
        names = [name for name, _ in effect.variables]
        domains = [self.objects_of(type_) for _, type_ in effect.variables]
        for values in itertools.product(*domains):
            full = {**binding, **dict(zip(names, values, strict=True))}
            yield full, (effect.atom.predicate, *(full.get(t, t) for t in effect.atom.terms))

    def applicable(self, schema: ActionSchema, state: State) -> list[tuple[str, ...]]:
        """The arguments of every ground action of ``schema`` applicable in ``state``, each
        once, as fast-downward grounds them: the precondition in disjunctive normal form,
        each disjunct an action of its own, its existential variables extra parameters
        that do not name it.

        The answer depends only on the facts of the predicates the precondition reads, so it
        is remembered by those (their :meth:`State.predicate_key`, the facts compared on a
        hit): a step that changes none of them finds the schema's actions as they were."""
        if not self.remembers:
            return self._applicable_now(schema, state)
        read = self._read_by.get(schema.name)
        if read is None:
            dynamic = predicates_of(schema.precondition) - self.static_predicates
            read = self._read_by[schema.name] = tuple(sorted(dynamic))
        key = (schema.name, *(state.predicate_key(p) for p in read))
        stored = self._applicable.get(key)
        facts = state.by_predicate
        if stored is not None and all(
            facts.get(p, set()) == held for p, held in zip(read, stored[0], strict=True)
        ):
            return stored[1]
        found = self._applicable_now(schema, state)
        if len(self._applicable) >= MEMO_ENTRIES:
            self._applicable.clear()
        self._applicable[key] = (tuple(frozenset(facts.get(p, ())) for p in read), found)
        return found

    def goal_holds(self, state: State) -> bool:
        """Whether the problem's goal holds in ``state``, remembered as :meth:`applicable`'s
        answers are: by the facts of the predicates the goal reads."""
        goal = self.problem.goal
        if not self.remembers:
            return self.holds(goal, state, {})
        read = self._read_by.get(GOAL)
        if read is None:
            read = self._read_by[GOAL] = tuple(sorted(predicates_of(goal) - self.static_predicates))
        key = (GOAL, *(state.predicate_key(p) for p in read))
        stored = self._goal.get(key)
        facts = state.by_predicate
        if stored is not None and all(
            facts.get(p, set()) == held for p, held in zip(read, stored[0], strict=True)
        ):
            return stored[1]
        holds = self.holds(goal, state, {})
        if len(self._goal) >= MEMO_ENTRIES:
            self._goal.clear()
        self._goal[key] = (tuple(frozenset(facts.get(p, ())) for p in read), holds)
        return holds

    def _applicable_now(self, schema: ActionSchema, state: State) -> list[tuple[str, ...]]:
        """:meth:`applicable`, computed."""
        variants = self._variants.get(schema.name)
        if variants is None:
            variants = self._variants[schema.name] = [
                Exists(schema.parameters + extra, And(parts))
                for extra, parts in disjunctive_normal_form(schema.precondition)
            ]
        found: dict[tuple[str, ...], None] = {}
        names = [name for name, _ in schema.parameters]
        for query in variants:
            for binding in self.solutions(query, state, {}):
                found.setdefault(tuple(binding[name] for name in names))
        return list(found)


class Relaxation(World):
    """The delete relaxation of a world from one state: a fact once reached stays reached,
    and so does its absence.

    A negated atom holds if the atom was false in the starting state or some reached action
    deletes it; any other negated or universal condition is taken as true and effect
    conditions as met. The facts reached are thus a superset of those any plan can reach, so
    a goal the relaxation cannot reach proves that no plan exists (holding an object that no
    receptacle takes, say), which fast-downward may need seconds of search to find out.

    Example:
        >>> domain = parse_domain('''(define (domain hand) (:predicates (held ?o) (free))
        ...   (:action take :parameters (?o - object) :precondition (and (free))
        ...     :effect (and (held ?o) (not (free))))
        ...   (:action drop :parameters (?o - object) :precondition (and (held ?o) (light ?o))
        ...     :effect (and (free) (not (held ?o)))))''')
        >>> def reachable(init: str) -> bool:
        ...     problem = parse_problem(f"(define (problem p) (:domain hand) "
        ...         f"(:objects anvil pen - object) (:init {init}) (:goal (held pen)))")
        ...     world = World(domain, problem)
        ...     return Relaxation(world, State(problem.init)).goal_reachable()
        >>> reachable("(held anvil) (light anvil)"), reachable("(held anvil)")
        (True, False)
    """

    def __init__(self, world: World, state: State) -> None:
        self.__dict__.update(world.__dict__)  # the same objects, types and grounding caches
        self.remembers = False  # relaxed answers are not the world's: never shared with it
        self.start = state
        self.deleted: set[Fact] = set()

    def holds(self, formula: Formula, state: State, binding: Binding) -> bool:
        """As :meth:`World.holds`, with negations and universals relaxed."""
        if isinstance(formula, Not):
            inner = formula.formula
            if not isinstance(inner, Atom):
                return True
            if inner.predicate != EQUALS:  # an inequality stays exact
                fact = (inner.predicate, *(binding.get(t, t) for t in inner.terms))
                return fact not in self.start.facts or fact in self.deleted
        elif isinstance(formula, Forall):
            return True
        return super().holds(formula, state, binding)

    def goal_reachable(self) -> bool:
        """Whether the goal holds once every action reachable in the relaxation is applied."""
        reached = self.start.copy()
        goal = self.problem.goal
        while not self.holds(goal, reached, {}):
            changed = False
            for schema in self.domain.actions.values():
                for arguments in self.applicable(schema, reached):
                    binding = dict(zip((n for n, _ in schema.parameters), arguments, strict=True))
                    for effect in schema.effects:
                        for _, fact in self.groundings(effect, binding):
                            if effect.delete and fact not in self.deleted:
                                self.deleted.add(fact)
                                changed = True
                            elif not effect.delete and fact not in reached:
                                reached.add(fact)
                                changed = True
            if not changed:
                return False
        return True


def _conjuncts(formula: Formula) -> list[Formula]:
    if isinstance(formula, And):
        return [part for sub in formula.parts for part in _conjuncts(sub)]
    return [formula]


@functools.lru_cache(maxsize=4096)
def merged_exists(formula: Exists) -> Exists:
    """``formula`` with every ``exists`` among its conjuncts merged into it (``exists ?r:
    exists ?o: A`` is ``exists ?r ?o: A``), where no variable name clashes: the same truth
    value, but the atoms of the inner body then bind the outer variables too, where alone
    the outer ones would range over their whole type (ALFWorld's goals: every receptacle,
    each with a search of its own). The solutions' order differs, so only truth may read it.

    Example:
        >>> goal = parse_formula(read_sexpr("(exists (?r - t) (exists (?o - u) (in ?o ?r)))"))
        >>> merged_exists(goal).variables
        (('?r', 't'), ('?o', 'u'))
    """
    variables = list(formula.variables)
    parts = _conjuncts(formula.formula)
    merged = True
    while merged:
        merged = False
        for index, part in enumerate(parts):
            if not isinstance(part, Exists):
                continue
            names = {name for name, _ in variables}
            others = parts[:index] + parts[index + 1 :]
            outside = frozenset().union(*(free_variables(other) for other in others))
            inner = {name for name, _ in part.variables}
            if inner & (names | outside):
                continue
            variables += part.variables
            parts = others[:index] + _conjuncts(part.formula) + others[index:]
            merged = True
            break
    return Exists(tuple(variables), And(tuple(parts)))


@functools.lru_cache(maxsize=4096)
def predicates_of(formula: Formula) -> frozenset[str]:
    """The predicates a formula reads (``=`` is none).

    Example:
        >>> formula = parse_formula(read_sexpr("(and (a ?x) (not (= ?x ?y)) (or (b) (c)))"))
        >>> sorted(predicates_of(formula))
        ['a', 'b', 'c']
    """
    if isinstance(formula, Atom):
        return frozenset() if formula.predicate == EQUALS else frozenset({formula.predicate})
    if isinstance(formula, Not | Exists | Forall):
        return predicates_of(formula.formula)
    return frozenset().union(*(predicates_of(part) for part in formula.parts))


@functools.lru_cache(maxsize=4096)
def free_variables(formula: Formula) -> frozenset[str]:
    """The ``?variables`` a formula reads that it does not quantify itself."""
    if isinstance(formula, Atom):
        return frozenset(t for t in formula.terms if t.startswith("?"))
    if isinstance(formula, Not):
        return free_variables(formula.formula)
    if isinstance(formula, (And, Or)):
        return frozenset().union(*(free_variables(part) for part in formula.parts))
    own = {name for name, _ in formula.variables}
    return free_variables(formula.formula) - own


Variant = tuple[tuple[tuple[str, str], ...], tuple[Formula, ...]]


def disjunctive_normal_form(formula: Formula) -> list[Variant]:
    """A precondition as fast-downward splits it: disjuncts of (existential variables,
    conjoined literals); a negated or universal formula stays one literal.

    Example:
        >>> f = parse_formula(read_sexpr("(and (a ?x) (or (b ?x) (exists (?y - t) (c ?x ?y))))"))
        >>> [(extra, len(parts)) for extra, parts in disjunctive_normal_form(f)]
        [((), 2), ((('?y', 't'),), 2)]
    """
    if isinstance(formula, And):
        variants: list[Variant] = [((), ())]
        for part in formula.parts:
            variants = [
                (extra + more, parts + added)
                for extra, parts in variants
                for more, added in disjunctive_normal_form(part)
            ]
        return variants
    if isinstance(formula, Or):
        return [v for part in formula.parts for v in disjunctive_normal_form(part)]
    if isinstance(formula, Exists):
        return [
            (formula.variables + extra, parts)
            for extra, parts in disjunctive_normal_form(formula.formula)
        ]
    return [((), (formula,))]


# ---------------------------------------------------------------------- ground actions
@dataclass(frozen=True)
class GroundAction:
    """An action schema with every parameter bound."""

    schema: ActionSchema
    arguments: tuple[str, ...]

    def __hash__(self) -> int:  # hashed for every admissible command of every state
        return hash((self.schema.name, self.arguments))

    @property
    def binding(self) -> dict[str, str]:
        """The parameters' objects."""
        parameters = self.schema.parameters
        return {name: value for (name, _), value in zip(parameters, self.arguments, strict=True)}

    @property
    def name(self) -> str:
        """fast-downward's operator name, e.g. ``(openobject agent1 loc_... drawer_...)``."""
        return f"({self.schema.name} {' '.join(self.arguments)})"


def changes_something(action: GroundAction) -> bool:
    """Whether an effect survives fast-downward's simplification: an add of an atom the
    precondition requires is dropped, so is a delete of an atom the action also adds, and an
    action left with no effect is no action (``GotoLocation`` to where the agent stands)."""
    binding = action.binding
    parts = action.schema.precondition
    required = {
        (p.predicate, *(binding.get(t, t) for t in p.terms))
        for p in (parts.parts if isinstance(parts, And) else (parts,))
        if isinstance(p, Atom)
    }
    adds: set[Fact] = set()
    deletes: set[Fact] = set()
    for effect in action.schema.effects:
        unconditional = isinstance(effect.condition, And) and not effect.condition.parts
        if effect.variables or not unconditional:
            return True  # a conditional or quantified effect: kept
        fact = (effect.atom.predicate, *(binding.get(t, t) for t in effect.atom.terms))
        (deletes if effect.delete else adds).add(fact)
    return bool((adds - required) or (deletes - adds))
