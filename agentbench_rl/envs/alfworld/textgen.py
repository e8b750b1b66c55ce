"""The texts of an ALFWorld game, derived from its grammar as TextWorld derives them.

A game's ``grammar`` field is TextWorld's logic file: a top-level ``grammar :: \"\"\"{...}\"\"\";``
of production rules (JSON: symbol -> list of ``{"condition", "rhs"}``) and one ``action Name
{ template :: "..."; feedback :: "..."; grammar :: \"\"\"{...}\"\"\"; }`` block per action, whose
rules join the top-level ones (a later symbol of the same name replaces an earlier one).

A right-hand side is a sequence of symbols, derived left to right:

* ``#symbol#``: the first rule of that symbol whose ``condition`` (a conjunctive query such as
  ``openable(r:receptacle) & opened(r:receptacle)``) has a match in the state under the
  current bindings;
* ``{expression}`` / ``{expression | query}``: the expression (an attribute of a bound entity,
  such as ``o.name``, or a ``#symbol#``) once, or once per match of the query, each match
  binding its new variables for what it derives;
* ``[{...}]``: those derivations as a list, "a, b, and c" (the grammar's ``list_separator``,
  ``list_last_separator`` and ``list_empty``);
* anything else is literal text.

Matches come in TextWorld's order: query atoms left to right, the facts of each in sorted
order, and a new variable never takes an object another variable of the match holds.
Expressions are evaluated by a small reader of Python's syntax (names, attributes, string
constants, ``+``, ``or``, ``and``) rather than ``eval``: a game file is data.

Example:
    >>> grammar = parse_logic(game["grammar"])  # doctest: +SKIP
    >>> grammar.actions["gotolocation"].template  # doctest: +SKIP
    'go to [{r.name | receptacleatlocation(r:receptacle, lend:location)}]'
"""

from __future__ import annotations

import ast
import functools
import json
import keyword
import re
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from agentbench_rl.envs.alfworld.pddl import Fact, State


class GrammarError(ValueError):
    """A game grammar this reader cannot read or derive."""


# ---------------------------------------------------------------------- entities
@dataclass
class Entity:
    """A named thing of the game as the texts see it (TextWorld's ``EntityInfo``).

    ``id`` is the PDDL name, ``name`` the display name ("desk 1").
    """

    id: str
    type: str
    name: str
    indefinite: str = "a"
    definite: str = "the"

    def __str__(self) -> str:
        return self.name


_ATTRIBUTES = frozenset({"id", "type", "name", "indefinite", "definite"})


# ---------------------------------------------------------------------- symbols
@dataclass(frozen=True)
class Literal:
    text: str


@dataclass(frozen=True)
class Nonterminal:
    tag: str


@dataclass(frozen=True)
class Expression:
    source: str


@dataclass(frozen=True)
class Conditional:
    expression: Nonterminal | Expression
    given: str


@dataclass(frozen=True)
class ListOf:
    item: Conditional


Symbol = Literal | Nonterminal | Conditional | ListOf

_TAG = re.compile(r"[\w()/!<>\-\s,.]+")
_GIVEN = re.compile(r"[^;|{}\n\[\]#]+")
_STATEMENT = re.compile(r"[^|\[\]{}\n<>]+")
_LITERAL = re.compile(r'[^;|"<>\[\]#{}]*')
_BAR = re.compile(r"\s*\|\s*")


@functools.lru_cache(maxsize=65536)
def parse_symbols(text: str) -> tuple[Symbol, ...]:
    """A right-hand side as symbols (cached: the games' grammars share most of their rules).
    Reading stops where no symbol starts (TextWorld's parser does the same: ``"{x})}"`` reads as
    ``{x}`` and ``)``)."""
    symbols: list[Symbol] = []
    position = 0
    while position < len(text):
        parsed = _symbol(text, position)
        if parsed is None:
            break
        symbol, position = parsed
        symbols.append(symbol)
    return tuple(symbols)


def _symbol(text: str, at: int) -> tuple[Symbol, int] | None:
    if text.startswith("[", at):
        inner = _conditional(text, at + 1)
        if inner is not None and text.startswith("]", inner[1]):
            return ListOf(inner[0]), inner[1] + 1
        return None
    if text.startswith("{", at):
        return _conditional(text, at)
    if text.startswith("#", at):
        return _nonterminal(text, at)
    if text.startswith('"', at):
        match = _LITERAL.match(text, at + 1)
        assert match is not None
        if text.startswith('"', match.end()):
            return Literal(_unescape(match.group())), match.end() + 1
    match = _LITERAL.match(text, at)
    assert match is not None
    if match.end() == at:
        return None
    return Literal(_unescape(match.group())), match.end()


def _nonterminal(text: str, at: int) -> tuple[Nonterminal, int] | None:
    match = _TAG.match(text, at + 1)
    if match is None or not text.startswith("#", match.end()):
        return None
    return Nonterminal(match.group()), match.end() + 1


def _conditional(text: str, at: int) -> tuple[Conditional, int] | None:
    if not text.startswith("{", at):
        return None
    expression: Nonterminal | Expression
    if text.startswith("#", at + 1):
        parsed = _nonterminal(text, at + 1)
        if parsed is None:
            return None
        expression, position = parsed
    else:
        match = _STATEMENT.match(text, at + 1)
        if match is None:
            return None
        expression, position = Expression(_unescape(match.group())), match.end()
    given = ""
    bar = _BAR.match(text, position)
    if bar is not None and bar.group().strip() == "|":
        match = _GIVEN.match(text, bar.end())
        if match is not None:
            given, position = _unescape(match.group()), match.end()
    if not text.startswith("}", position):
        return None
    return Conditional(expression, given), position + 1


def _unescape(text: str) -> str:
    return text.replace("\\n", "\n")


# ---------------------------------------------------------------------- queries
@dataclass(frozen=True)
class QueryAtom:
    """``name(ph:type, ...)``: a predicate over typed placeholders."""

    predicate: str
    placeholders: tuple[tuple[str, str], ...]


_QUERY_ATOM = re.compile(r"^\s*([\w-]+)\s*\((.*)\)\s*$")
_QUERIES: dict[str, tuple[QueryAtom, ...]] = {}


def parse_query(text: str) -> tuple[QueryAtom, ...]:
    """``a(x:t) & b(x:t, y:u)`` as query atoms (cached: a grammar asks the same few).

    Example:
        >>> parse_query("openable(r:receptacle) & opened(r:receptacle)")[1]
        QueryAtom(predicate='opened', placeholders=(('r', 'receptacle'),))
    """
    parsed = _QUERIES.get(text)
    if parsed is None:
        atoms = []
        for part in text.split("&"):
            match = _QUERY_ATOM.match(part)
            if match is None:
                raise GrammarError(f"grammar: cannot read the condition {text!r}")
            placeholders = []
            for item in match.group(2).split(","):
                if item.strip():
                    name, _, type_ = item.partition(":")
                    placeholders.append((name.strip(), type_.strip()))
            atoms.append(QueryAtom(match.group(1), tuple(placeholders)))
        parsed = tuple(atoms)
        _QUERIES[text] = parsed
    return parsed


#: Placeholder -> object: TextWorld keys bindings by placeholder name *and* type.
Mapping_ = dict[tuple[str, str], str]


# ---------------------------------------------------------------------- the grammar
@dataclass(frozen=True)
class Rule:
    condition: str
    rhs: tuple[Symbol, ...]


@dataclass(frozen=True)
class ActionText:
    """An action's command template and the symbol its feedback derives from."""

    template: str
    feedback: str


@dataclass
class Grammar:
    """A game's production rules and action texts (:func:`parse_logic`)."""

    rules: dict[str, tuple[Rule, ...]]
    actions: dict[str, ActionText]
    _parsed: dict[str, tuple[Symbol, ...]] = field(default_factory=dict)

    def symbols(self, text: str) -> tuple[Symbol, ...]:
        """``text`` parsed as a right-hand side (cached)."""
        parsed = self._parsed.get(text)
        if parsed is None:
            parsed = self._parsed[text] = parse_symbols(text)
        return parsed


#: A ``"""`` block is matched quote by quote (the unrolled loop), not character by character.
_TOKENS = re.compile(
    r'(?P<block>"""[^"]*(?:"(?!"")[^"]*)*""")|(?P<string>"[^"]*")|(?P<name>[\w/-]+)|(?P<punct>::|[;{}])'
    r"|(?P<comment>#[^\n]*)|(?P<space>\s+)"
)


def _logic_tokens(text: str) -> Iterator[tuple[str, str]]:
    position = 0
    while position < len(text):
        match = _TOKENS.match(text, position)
        if match is None:
            near = text[position : position + 40]
            raise GrammarError(f"grammar: cannot read the logic at {near!r}")
        position = match.end()
        kind = match.lastgroup or ""
        if kind not in ("comment", "space"):
            yield kind, match.group()


def parse_logic(text: str) -> Grammar:
    """Read a game's ``grammar`` field (TextWorld's logic file)."""
    tokens = list(_logic_tokens(text))
    rules_json: dict[str, list[dict[str, str]]] = {}
    actions: dict[str, ActionText] = {}
    index = 0

    def expect(value: str) -> None:
        nonlocal index
        if index >= len(tokens) or tokens[index][1] != value:
            found = tokens[index][1] if index < len(tokens) else "the end"
            raise GrammarError(f"grammar: expected {value!r}, found {found!r}")
        index += 1

    def block() -> str:
        nonlocal index
        kind, value = tokens[index]
        if kind != "block":
            raise GrammarError(f'grammar: expected a """ block, found {value!r}')
        index += 1
        return value[3:-3]  # JSON: its indentation needs no dedent

    while index < len(tokens):
        value = tokens[index][1]
        index += 1
        if value == "grammar":
            expect("::")
            rules_json.update(json.loads(block()))
            expect(";")
        elif value == "action":
            name = tokens[index][1]
            index += 1
            expect("{")
            template = feedback = ""
            while tokens[index][1] != "}":
                key = tokens[index][1]
                index += 1
                expect("::")
                if key == "grammar":
                    code = block()
                    code = "\n".join(
                        line for line in code.split("\n") if not line.lstrip().startswith("#")
                    )
                    rules_json.update(json.loads(code))
                elif key == "pddl":
                    block()
                else:
                    string = tokens[index][1]
                    index += 1
                    if key == "template":
                        template = string[1:-1]
                    elif key == "feedback":
                        feedback = string[1:-1]
                expect(";")
            expect("}")
            actions[name.lower()] = ActionText(template, feedback)
        else:
            raise GrammarError(f"grammar: unexpected {value!r}")
    rules = {
        symbol: tuple(
            Rule(str(rule.get("condition", "")), parse_symbols(rule["rhs"]))
            for rule in alternatives
        )
        for symbol, alternatives in rules_json.items()
    }
    return Grammar(rules, actions)


# ---------------------------------------------------------------------- derivation
#: Typed fact lists a deriver remembers (by the predicate's facts; it starts afresh when full).
TYPED_FACT_LISTS = 4096


@dataclass
class Context:
    """What a derivation sees: the state, the bound placeholders and their entities."""

    state: State
    mapping: Mapping_
    variables: dict[str, Entity]


class Deriver:
    """Derives texts of one game: its grammar, entities and object types.

    ``subtypes(type)`` gives the object types a query placeholder of ``type`` matches.
    """

    def __init__(
        self,
        grammar: Grammar,
        entities: Mapping[str, Entity],
        object_types: Mapping[str, str],
        subtypes: Callable[[str], frozenset[str]],
    ) -> None:
        self.grammar = grammar
        self.entities = entities
        self.object_types = object_types
        self.subtypes = subtypes
        self._kinds_of: dict[str, frozenset[str]] = {}
        self._plain: dict[str, tuple[str, ...] | None] = {}
        self._reads: dict[str, Reads | None] = {}
        self._typed_facts: dict[tuple[QueryAtom, int, int], tuple[frozenset[Fact], list[Fact]]] = {}

    def derive(self, text: str, state: State, mapping: Mapping_ | None = None) -> str:
        """The text ``text`` derives to in ``state`` with ``mapping`` bound.

        Example:
            >>> deriver.derive("#intro#", state)  # doctest: +SKIP
            '-= Welcome to TextWorld, ALFRED! =-\\n\\nYou are in the middle of a room. ...'
        """
        mapping = dict(mapping or {})
        variables = {name: self.entities[value] for (name, _), value in mapping.items()}
        plain = self._plain_parts(text)
        if plain is not None and all(name in variables for name in plain[1::2]):
            # literals and bound names alone (most command templates): no state is read
            return "".join(str(variables[p]) if i % 2 else p for i, p in enumerate(plain))
        context = Context(state, mapping, variables)
        return "".join(self._derive(symbol, context) for symbol in self.grammar.symbols(text))

    def derivation_key(self, text: str, mapping: Mapping_) -> Hashable | None:
        """A key under which ``text`` derives alike on one state for every mapping with that
        key (``go to`` reads its destination, not where the agent stands): the text, the
        bindings its expressions and queries read, and the other bound objects that a query
        could still match (a placeholder never takes an object bound elsewhere). None where
        the text names a symbol, whose rules may read anything."""
        if text not in self._reads:
            self._reads[text] = _reads(self.grammar.symbols(text))
        reads = self._reads[text]
        if reads is None:
            return None
        names, placeholders = reads
        # in the mapping's order: where a name is bound under two types, the last one wins
        read = tuple(i for i in mapping.items() if i[0][0] in names or i[0] in placeholders)
        free = [self._kinds(type_) for _, type_ in placeholders - mapping.keys()]
        types = self.object_types
        others = sorted(
            value
            for key, value in mapping.items()
            if not (key[0] in names or key in placeholders)
            and any(types.get(value) in kinds for kinds in free)
        )
        return text, read, tuple(others)

    def _plain_parts(self, text: str) -> tuple[str, ...] | None:
        """``text`` as literal, name, literal, name, ... where it is only literals and bare
        ``{name}`` placeholders (``take {o} from {r}``), else None (worked out once)."""
        if text not in self._plain:
            self._plain[text] = _plain_parts(self.grammar.symbols(text))
        return self._plain[text]

    def _derive(self, symbol: Symbol, context: Context) -> str:
        if isinstance(symbol, Literal):
            return symbol.text
        if isinstance(symbol, Nonterminal):
            return self._replace(symbol.tag, context)
        if isinstance(symbol, Conditional):
            return "".join(self._conditional(symbol, context))
        items = self._conditional(symbol.item, context)
        if not items:
            return self._replace("list_empty", context)
        if len(items) == 1:
            return items[0]
        separator = self._replace("list_separator", context)
        last = self._replace("list_last_separator", context)
        return separator.join(items[:-1]) + last + items[-1]

    def _replace(self, tag: str, context: Context) -> str:
        rules = self.grammar.rules.get(tag)
        if not rules:
            raise GrammarError(f"grammar: no rule for the symbol '#{tag}#'")
        for rule in rules:
            if not rule.condition or self._first_match(rule.condition, context) is not None:
                return "".join(self._derive(symbol, context) for symbol in rule.rhs)
        raise GrammarError(f"grammar: no rule of '#{tag}#' applies")

    def _conditional(self, symbol: Conditional, context: Context) -> list[str]:
        contexts = [context]
        if symbol.given:
            contexts = [
                Context(
                    context.state,
                    mapping,
                    {
                        **context.variables,
                        **{name: self.entities[value] for (name, _), value in mapping.items()},
                    },
                )
                for mapping in self.matches(symbol.given, context)
            ]
        expression = symbol.expression
        if isinstance(expression, Nonterminal):
            return [self._replace(expression.tag, each) for each in contexts]
        return [str(evaluate(expression.source, each.variables)) for each in contexts]

    def _first_match(self, query: str, context: Context) -> Mapping_ | None:
        return next(iter(self.matches(query, context)), None)

    def matches(self, query: str, context: Context) -> Iterator[Mapping_]:
        """Every binding of ``query``'s placeholders that makes it true, TextWorld's order."""
        atoms = parse_query(query)
        mapping = dict(context.mapping)
        used = set(mapping.values())
        yield from self._match(atoms, 0, mapping, used, context.state)

    def _match(
        self,
        atoms: Sequence[QueryAtom],
        depth: int,
        mapping: Mapping_,
        used: set[str],
        state: State,
    ) -> Iterator[Mapping_]:
        if depth == len(atoms):
            yield dict(mapping)
            return
        atom = atoms[depth]
        for fact in self._facts(atom, state, mapping):
            added: list[tuple[str, str]] = []
            for placeholder, value in zip(atom.placeholders, fact[1:], strict=True):
                existing = mapping.get(placeholder)
                if existing is None:
                    if value in used:
                        break
                    mapping[placeholder] = value
                    used.add(value)
                    added.append(placeholder)
                elif existing != value:
                    break
            else:
                yield from self._match(atoms, depth + 1, mapping, used, state)
            for placeholder in added:
                used.discard(mapping.pop(placeholder))

    def _facts(self, atom: QueryAtom, state: State, mapping: Mapping_) -> list[Fact]:
        """The facts of the atom's predicate that agree with its bound placeholders and whose
        objects have the placeholders' types, sorted as TextWorld sorts propositions (by
        argument names: an object's name decides its type, so the names alone order them).

        A bound placeholder narrows them to the facts with that object there (the state's
        index); else the predicate's typed facts are remembered by the predicate's facts (the
        command texts of a game all read its initial state)."""
        for position, placeholder in enumerate(atom.placeholders):
            value = mapping.get(placeholder)
            if value is not None:
                indexed = state.by_argument.get((atom.predicate, position, value), ())
                return self._typed_sorted(atom, indexed)
        key = (atom, *state.predicate_key(atom.predicate))
        facts = state.by_predicate.get(atom.predicate, set())
        stored = self._typed_facts.get(key)
        if stored is not None and stored[0] == facts:
            return stored[1]
        typed = self._typed_sorted(atom, facts)
        if len(self._typed_facts) >= TYPED_FACT_LISTS:
            self._typed_facts.clear()
        self._typed_facts[key] = (frozenset(facts), typed)
        return typed

    def _typed_sorted(self, atom: QueryAtom, facts: Iterable[Fact]) -> list[Fact]:
        """Those of ``facts`` with one object per placeholder, each of a type it matches,
        sorted."""
        allowed = tuple(self._kinds(type_) for _, type_ in atom.placeholders)
        return sorted(fact for fact in facts if self._typed(fact, allowed))

    def _kinds(self, type_: str) -> frozenset[str]:
        """The object types a placeholder of ``type_`` matches (worked out once)."""
        kinds = self._kinds_of.get(type_)
        if kinds is None:
            kinds = self._kinds_of[type_] = self.subtypes(type_)
        return kinds

    def _typed(self, fact: Fact, allowed: tuple[frozenset[str], ...]) -> bool:
        """Whether ``fact`` has one object per placeholder, each of an allowed type."""
        if len(fact) != len(allowed) + 1:
            return False
        types = self.object_types
        return all(types.get(v) in kinds for v, kinds in zip(fact[1:], allowed, strict=True))


#: What a text's derivation reads of a mapping: the names its expressions use, and the
#: (name, type) placeholders its queries bind.
Reads = tuple[frozenset[str], frozenset[tuple[str, str]]]


def _reads(symbols: Sequence[Symbol]) -> Reads | None:
    """What the symbols read of a mapping, or None where one names a symbol.

    Example:
        >>> names, placeholders = _reads(parse_symbols("go to [{r.name | at(r:o, lend:l)}]"))
        >>> sorted(names), sorted(placeholders)
        (['r'], [('lend', 'l'), ('r', 'o')])
    """
    names: set[str] = set()
    placeholders: set[tuple[str, str]] = set()
    for symbol in symbols:
        if isinstance(symbol, Literal):
            continue
        conditional = symbol.item if isinstance(symbol, ListOf) else symbol
        if not isinstance(conditional, Conditional):
            return None
        if not isinstance(conditional.expression, Expression):
            return None
        tree = ast.parse(conditional.expression.source.strip(), mode="eval")
        names |= {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        if conditional.given:
            atoms = parse_query(conditional.given)
            placeholders |= {placeholder for atom in atoms for placeholder in atom.placeholders}
    return frozenset(names), frozenset(placeholders)


def _plain_parts(symbols: Sequence[Symbol]) -> tuple[str, ...] | None:
    """The symbols as literal, name, literal, ... where they are only literals and bare
    ``{name}`` placeholders, else None.

    Example:
        >>> _plain_parts(parse_symbols("take {o} from {r}"))
        ('take ', 'o', ' from ', 'r', '')
        >>> _plain_parts(parse_symbols("go to [{r.name | at(r:receptacle)}]")) is None
        True
    """
    parts = [""]
    for symbol in symbols:
        if isinstance(symbol, Literal):
            parts[-1] += symbol.text
            continue
        if not (isinstance(symbol, Conditional) and isinstance(symbol.expression, Expression)):
            return None
        name = symbol.expression.source.strip()
        if symbol.given or not name.isidentifier() or keyword.iskeyword(name):
            return None
        parts += [name, ""]
    return tuple(parts)


# ---------------------------------------------------------------------- expressions
_EXPRESSIONS: dict[str, ast.expr] = {}


def evaluate(source: str, variables: Mapping[str, Entity]) -> object:
    """A grammar expression (``o.indefinite + ' ' + o.name``, ``r.name or r.id``).

    Example:
        >>> evaluate("o.indefinite + ' ' + o.name", {"o": Entity("mug_1", "object", "mug 1")})
        'a mug 1'
    """
    tree = _EXPRESSIONS.get(source)
    if tree is None:
        try:
            tree = _EXPRESSIONS[source] = ast.parse(source.strip(), mode="eval").body
        except SyntaxError:
            raise GrammarError(f"grammar: cannot read the expression {source!r}") from None
    return _evaluate(tree, variables, source)


def _evaluate(node: ast.expr, variables: Mapping[str, Entity], source: str) -> object:
    if isinstance(node, ast.Name):
        if node.id not in variables:
            raise GrammarError(f"grammar: {source!r} names {node.id!r}, which is not bound")
        return variables[node.id]
    if isinstance(node, ast.Attribute) and node.attr in _ATTRIBUTES:
        return getattr(_evaluate(node.value, variables, source), node.attr)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = _evaluate(node.left, variables, source)
        right = _evaluate(node.right, variables, source)
        if not (isinstance(left, str) and isinstance(right, str)):
            raise GrammarError(f"grammar: {source!r} adds what is not text")
        return left + right
    if isinstance(node, ast.BoolOp):
        value: object = None
        for operand in node.values:
            value = _evaluate(operand, variables, source)
            if isinstance(node.op, ast.Or) and value:
                return value
            if isinstance(node.op, ast.And) and not value:
                return value
        return value
    raise GrammarError(f"grammar: the expression {source!r} uses what games do not")
