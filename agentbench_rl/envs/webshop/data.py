"""WebShop's data files and product loading, as the original's ``engine.load_products``.

The data folder (``$WEBSHOP_DATA`` or the env's ``data_dir``) holds the original files:
``items_shuffle_1000.json`` + ``items_ins_v2_1000.json`` (the 1k setting) or ``items_shuffle.json``
+ ``items_ins_v2.json`` (the full catalogue), and ``items_human_ins.json`` for human goals (the 1k
subset we have is accepted under its own name ``items_human_ins_1k_subset.json``).

Cleaning follows ``load_products``: skip asins that are ``nan`` or longer than 10 characters and
repeated asins, parse ``pricing`` into one price or a range, lower-case option names and values
(``/`` becomes `` | ``), take attributes from the instruction file (``DUMMY_ATTR`` when missing),
and lower-case and strip the product's search query. Reviews are not loaded (the original's text
env has that code commented out), so every rating is ``N.A.``.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Literal

CatalogueName = Literal["1k", "full"]

#: Catalogue and synthetic-instruction file of each setting, as the original names them.
CATALOGUE_FILES: dict[str, tuple[str, str]] = {
    "1k": ("items_shuffle_1000.json", "items_ins_v2_1000.json"),
    "full": ("items_shuffle.json", "items_ins_v2.json"),
}
#: Human instructions: the original's name first, then the 1k subset we were given.
HUMAN_FILES = ("items_human_ins.json", "items_human_ins_1k_subset.json")
DATA_ENV_VAR = "WEBSHOP_DATA"
#: What the original shows when a product has no rating (reviews are never loaded).
RATING = "N.A."
#: The original's default price for products without one.
DEFAULT_PRICE = 100.0
#: Placeholder attribute of products the instruction file gives none (as the original).
DUMMY_ATTRIBUTE = "DUMMY_ATTR"


class DataMissingError(FileNotFoundError):
    """The data folder or one of its files is missing."""


class DataFormatError(ValueError):
    """A data file does not have the original's format."""


@dataclass(frozen=True)
class Product:
    """One product after cleaning (the fields of the original's product dict we use).

    Attributes:
        asin: Amazon id, upper-case as in the data (``B06Y3VLDFB``).
        name: the title (the original's ``name`` and ``Title``).
        description: ``full_description`` (the original's ``Description``).
        bullet_points: ``small_description`` as a list (the original's ``BulletPoints``).
        pricing: one price or the two ends of a range.
        price_tag: the price as pages show it (``$10.99`` or ``$10.99 to $15.99``).
        options: option name -> values, lower-cased, ``/`` shown as `` | ``.
        attributes: the product's attributes from the instruction file (``Attributes``).
        query: the search query the product was scraped for, lower-cased and stripped.
        category: top-level category (``beauty``, ``garden``, ...).
        product_category: the breadcrumb (``Beauty & Personal Care › Skin Care › ...``).
        instruction_text: the synthetic instruction, if the product has one.
        instruction_attributes: the attributes that instruction asks for.
        human_instructions: the human-written instructions of this product (raw dicts).
    """

    asin: str
    name: str
    description: str
    bullet_points: tuple[str, ...]
    pricing: tuple[float, ...]
    price_tag: str
    options: Mapping[str, tuple[str, ...]]
    attributes: tuple[str, ...]
    query: str
    category: str
    product_category: str
    instruction_text: str | None = None
    instruction_attributes: tuple[str, ...] = ()
    human_instructions: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class Catalogue:
    """The products of one setting, in file order, with the price each one sells at.

    Attributes:
        products: the cleaned products, in the catalogue file's order.
        prices: asin -> the price a purchase pays (a range's price is drawn once, as the
            original's ``generate_product_prices``).
        files: name -> sha256 of each data file read.
        complete: whether every product of the file is in (no ``num_products`` cut took any off).
    """

    products: tuple[Product, ...]
    prices: Mapping[str, float]
    files: Mapping[str, str]
    complete: bool = True
    by_asin: Mapping[str, Product] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_asin", {product.asin: product for product in self.products})

    def __len__(self) -> int:
        return len(self.products)


def resolve_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The data folder: ``data_dir`` if given, else ``$WEBSHOP_DATA``; raises if neither exists.

    Example:
        >>> try:
        ...     resolve_data_dir("/nonexistent/webshop")
        ... except DataMissingError as error:
        ...     print(str(error)[:59])
        webshop: data folder /nonexistent/webshop not found (instal
    """
    hint = (
        f"install the files WebShop's setup.sh downloads with `agentbench-rl data install webshop "
        f"--source FOLDER_OR_URL --data-dir DIR`, then set ${DATA_ENV_VAR}=DIR or pass "
        f"`--env-option data_dir=DIR` (the folder with {CATALOGUE_FILES['1k'][0]})"
    )
    if data_dir is None:
        data_dir = os.environ.get(DATA_ENV_VAR) or None
        if data_dir is None:
            raise DataMissingError(f"webshop: no data folder ({hint})")
    path = Path(data_dir).expanduser()
    if not path.is_dir():
        raise DataMissingError(f"webshop: data folder {path} not found ({hint})")
    return path


def parse_pricing(pricing: Any) -> tuple[tuple[float, ...], str]:
    """Prices and price tag of a ``pricing`` string, as ``load_products`` parses it.

    Every ``$`` starts a price; characters other than digits and ``.`` are dropped; a range keeps
    its first two prices. No pricing means $100.

    Example:
        >>> parse_pricing("$10.99 to $15.99")
        ((10.99, 15.99), '$10.99 to $15.99')
        >>> parse_pricing("$877.80")
        ((877.8,), '$877.8')
        >>> parse_pricing("")
        ((100.0,), '$100.0')
    """
    if not pricing:
        return (DEFAULT_PRICE,), f"${DEFAULT_PRICE}"
    try:
        prices = [
            float(Decimal(re.sub(r"[^\d.]", "", piece))) for piece in str(pricing).split("$")[1:]
        ]
    except InvalidOperation:
        raise DataFormatError(f"webshop: unparsable pricing {pricing!r}") from None
    if not prices:
        raise DataFormatError(f"webshop: pricing {pricing!r} has no '$' price")
    if len(prices) == 1:
        return (prices[0],), f"${prices[0]}"
    return (prices[0], prices[1]), f"${prices[0]} to ${prices[1]}"


def parse_options(customization_options: Any) -> dict[str, tuple[str, ...]]:
    """Option name -> values, as ``load_products`` cleans ``customization_options``.

    Example:
        >>> parse_options({"Color": [{"value": " Black/White "}], "Size": None})
        {'color': ('black | white',)}
    """
    options: dict[str, tuple[str, ...]] = {}
    if not customization_options:
        return options
    for option_name, contents in dict(customization_options).items():
        if contents is None:
            continue
        options[str(option_name).lower()] = tuple(
            str(content["value"]).strip().replace("/", " | ").lower() for content in contents
        )
    return options


def _text(value: Any) -> str:
    # Jinja renders a missing value (None) as "None"; so do we, and everything else as str().
    return value if isinstance(value, str) else str(value)


def _read_json(path: Path) -> tuple[Any, str]:
    if not path.is_file():
        raise DataMissingError(f"webshop: data file {path} not found")
    raw = path.read_bytes()
    try:
        return json.loads(raw), hashlib.sha256(raw).hexdigest()
    except json.JSONDecodeError as error:
        raise DataFormatError(f"webshop: {path} is not valid JSON ({error})") from None


def human_file(data_dir: Path) -> Path:
    """The human-instruction file of ``data_dir`` (the original name first).

    Example:
        >>> human_file(Path("/nonexistent"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        agentbench_rl.envs.webshop.data.DataMissingError: webshop: human goals need ...
    """
    for name in HUMAN_FILES:
        if (data_dir / name).is_file():
            return data_dir / name
    raise DataMissingError(
        f"webshop: human goals need {HUMAN_FILES[0]} (or {HUMAN_FILES[1]}) in {data_dir}"
    )


def clean_product(
    raw: Mapping[str, Any],
    attributes: Mapping[str, Any],
    human: Mapping[str, Any] | None,
) -> Product:
    """One raw product dict cleaned as ``load_products`` does (see :class:`Product`).

    Example:
        >>> raw = {"asin": "B0X", "name": "Mug", "full_description": "A mug.",
        ...        "small_description": "Holds tea", "pricing": "$5", "query": " Mugs ",
        ...        "category": "garden", "product_category": "Home › Kitchen",
        ...        "customization_options": {"Color": [{"value": "Red"}]}}
        >>> product = clean_product(raw, {"B0X": {"attributes": ["dishwasher safe"]}}, None)
        >>> product.price_tag, product.options, product.query, product.bullet_points
        ('$5.0', {'color': ('red',)}, 'mugs', ('Holds tea',))
    """
    asin = str(raw["asin"])
    bullets = raw.get("small_description")
    pricing, price_tag = parse_pricing(raw.get("pricing"))
    entry = attributes.get(asin) or {}
    product_attributes = entry.get("attributes") if "attributes" in entry else None
    instruction = entry.get("instruction")
    return Product(
        asin=asin,
        name=_text(raw.get("name")),
        description=_text(raw.get("full_description")),
        bullet_points=tuple(
            _text(bullet) for bullet in (bullets if isinstance(bullets, list) else [bullets])
        ),
        pricing=pricing,
        price_tag=price_tag,
        options=parse_options(raw.get("customization_options")),
        attributes=tuple(product_attributes)
        if product_attributes is not None
        else (DUMMY_ATTRIBUTE,),
        query=_text(raw.get("query")).lower().strip(),
        category=_text(raw.get("category")),
        product_category=_text(raw.get("product_category")),
        instruction_text=instruction,
        instruction_attributes=tuple(entry.get("instruction_attributes") or ()),
        human_instructions=tuple((human or {}).get(asin) or ()),
    )


def generate_product_prices(products: Sequence[Product], rng: random.Random) -> dict[str, float]:
    """The price each product sells at, as the original's ``generate_product_prices``.

    A range's price is drawn uniformly from its two ends. The original draws from Python's
    unseeded global generator (so its prices change from run to run); we take ``rng``.

    Example:
        >>> product = clean_product({"asin": "B0X", "pricing": "$10 to $20"}, {}, None)
        >>> 10.0 <= generate_product_prices([product], random.Random(0))["B0X"] <= 20.0
        True
    """
    prices: dict[str, float] = {}
    for product in products:
        if len(product.pricing) == 1:
            prices[product.asin] = product.pricing[0]
        else:
            prices[product.asin] = rng.uniform(*product.pricing[:2])
    return prices


def load_catalogue(
    data_dir: Path,
    catalogue: CatalogueName = "1k",
    num_products: int | None = None,
    human_goals: bool = False,
    rng: random.Random | None = None,
) -> Catalogue:
    """Read and clean a catalogue as the original's ``load_products``.

    Args:
        data_dir: the data folder.
        catalogue: ``"1k"`` (``items_shuffle_1000.json``) or ``"full"`` (``items_shuffle.json``).
        num_products: keep only the first N products of the file (the original's
            ``num_products``); ``None`` keeps all.
        human_goals: also read the human instructions (needed for human goals only).
        rng: the generator range prices are drawn from (see :func:`generate_product_prices`).

    Example:
        >>> load_catalogue(Path("/nonexistent"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        agentbench_rl.envs.webshop.data.DataMissingError: webshop: data file /nonexistent/...
    """
    if catalogue not in CATALOGUE_FILES:
        raise ValueError(f"webshop: unknown catalogue '{catalogue}' (choose 1k or full)")
    product_name, attribute_name = CATALOGUE_FILES[catalogue]
    raw_products, product_sha = _read_json(data_dir / product_name)
    attributes, attribute_sha = _read_json(data_dir / attribute_name)
    files = {product_name: product_sha, attribute_name: attribute_sha}
    if not isinstance(raw_products, list) or not isinstance(attributes, dict):
        raise DataFormatError(
            f"webshop: {product_name} must hold a list of products and {attribute_name} a dict"
        )
    human: dict[str, Any] | None = None
    if human_goals:
        path = human_file(data_dir)
        human, files[path.name] = _read_json(path)
        if not isinstance(human, dict):
            raise DataFormatError(f"webshop: {path.name} must hold a dict asin -> instructions")
    complete = num_products is None or num_products >= len(raw_products)
    if not complete:
        # The original assumes the file is already shuffled and keeps its head.
        raw_products = raw_products[:num_products]

    products: list[Product] = []
    seen: set[str] = set()
    for position, raw in enumerate(raw_products):
        if not isinstance(raw, dict):
            raise DataFormatError(f"webshop: entry {position} of {product_name} is not a product")
        asin = str(raw.get("asin"))
        if asin == "nan" or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        try:
            products.append(clean_product(raw, attributes, human))
        except (AttributeError, KeyError, TypeError) as error:
            raise DataFormatError(f"webshop: product {asin} is malformed ({error!r})") from None
    prices = generate_product_prices(products, rng or random.Random())
    return Catalogue(products=tuple(products), prices=prices, files=files, complete=complete)
