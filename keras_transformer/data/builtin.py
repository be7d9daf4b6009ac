"""A built-in English -> German corpus generated from CLDR and num2words data.

Nothing is downloaded: the sentence pairs are made at run time from data that
ships with two well-kept packages, Babel (the Unicode CLDR: month and weekday
names, date, time, unit, currency and list patterns, plural rules) and
num2words (spelling numbers). Each pair is a short phrase with a real
translation phenomenon; `BUILTIN_CATEGORIES` lists them with an example.
The generation is deterministic for a seed and fixed versions of Babel and
num2words, and takes two to three seconds of CPU time (then cached in memory).
"""

from __future__ import annotations

import datetime
import decimal
import functools
import logging
import random
from collections.abc import Callable

import babel
import babel.dates
import babel.lists
import babel.numbers
import babel.units
import num2words

from keras_transformer.data.corpus import ParallelCorpus

logger = logging.getLogger(__name__)

SPLIT_SIZES = {"train": 24000, "val": 1000, "test": 1000}

# name -> (share of the corpus, what it teaches, example pair)
BUILTIN_CATEGORIES: dict[str, tuple[float, str, tuple[str, str]]] = {
    "date": (
        0.24,
        "CLDR long and full dates: day/month reordering, month and weekday "
        "names, the German ordinal dot",
        ("Friday, May 3, 2024", "Freitag, 3. Mai 2024"),
    ),
    "day_of_month": (
        0.14,
        "ordinal day phrases with case agreement after prepositions "
        "(der dritte / am dritten / seit dem dritten / bis zum dritten)",
        ("since the third of May", "seit dem dritten Mai"),
    ),
    "time": (
        0.08,
        "CLDR short times: 12-hour clock with AM/PM to the 24-hour clock",
        ("at 3:45 PM", "um 15:45 Uhr"),
    ),
    "relative_time": (
        0.02,
        "CLDR relative times: word order (ago -> vor) and dative plurals",
        ("three days ago", "vor drei Tagen"),
    ),
    "number": (
        0.12,
        "num2words cardinals 0-9999: German writes one word with units before tens",
        ("three hundred and forty-two", "dreihundertzweiundvierzig"),
    ),
    "quantity": (
        0.14,
        "CLDR unit names with plural agreement, numbers as digits or words",
        ("twelve hours", "zwölf Stunden"),
    ),
    "money": (
        0.12,
        "CLDR currency formats: symbol position, decimal and grouping "
        "separators, currency names",
        ("$1,234.50", "1.234,50 $"),
    ),
    "list": (
        0.14,
        "CLDR list patterns (no serial comma in German) over weekday, month, "
        "country and territory names",
        ("France, Austria, and Spain", "Frankreich, Österreich und Spanien"),
    ),
}

_EN = babel.Locale("en")
_DE = babel.Locale("de")


def builtin_corpus(
    split: str = "train", seed: int = 0, max_pairs: int | None = None
) -> ParallelCorpus:
    """English -> German pairs generated from CLDR (Babel) and num2words.

    The offline default corpus: 26000 distinct pairs, split into train
    (24000), val (1000) and test (1000) with no source sentence in two splits.
    The same seed always gives the same pairs and splits (for the same Babel
    and num2words versions); another seed draws other pairs. Categories
    (see `BUILTIN_CATEGORIES`) are dates ("Friday, May 3, 2024" ->
    "Freitag, 3. Mai 2024"), ordinal day phrases with case agreement
    ("since the third of May" -> "seit dem dritten Mai"), times
    ("at 3:45 PM" -> "um 15:45 Uhr"), relative times ("three days ago" ->
    "vor drei Tagen"), number words ("forty-two" -> "zweiundvierzig"),
    quantities ("twelve hours" -> "zwölf Stunden"), money ("$1,234.50" ->
    "1.234,50 $") and lists ("France, Austria, and Spain" ->
    "Frankreich, Österreich und Spanien"). Every phrase is short: at most 8
    words, and at most about 20 subword tokens with a vocabulary trained on
    it. The targets follow CLDR and num2words, which are deterministic, so a
    model can learn them exactly.

    Args:
        split: `"train"`, `"val"` or `"test"`.
        seed: seed of the generation and of the split.
        max_pairs: keep only the first `max_pairs` pairs of the split (a
            random subset, since the split is shuffled), e.g. for fast runs.

    Returns:
        A `ParallelCorpus` named `"builtin/{split}"`.

    Example:
        >>> test = builtin_corpus("test", seed=0)
        >>> len(test)
        1000
        >>> train = builtin_corpus("train", seed=0)
        >>> set(test.sources).isdisjoint(train.sources)
        True
    """
    if split not in SPLIT_SIZES:
        raise ValueError(
            f"Unknown split. Received: split={split!r}; expected one of "
            f"{tuple(SPLIT_SIZES)}"
        )
    pairs = _split_pairs(seed)[split]
    if max_pairs is not None:
        pairs = pairs[:max_pairs]
    return ParallelCorpus(
        tuple(source for source, _ in pairs),
        tuple(target for _, target in pairs),
        name=f"builtin/{split}",
    )


def builtin_corpus_info(seed: int = 0) -> dict:
    """Describes the built-in corpus: categories, counts, package versions.

    Args:
        seed: the seed given to `builtin_corpus`.

    Returns:
        A dict with `"categories"` (name -> description, example and number
        of pairs per split), `"splits"` (split -> number of pairs) and
        `"versions"` (Babel, CLDR and num2words versions the pairs come from).

    Example:
        >>> info = builtin_corpus_info()
        >>> info["splits"]
        {'train': 24000, 'val': 1000, 'test': 1000}
        >>> info["categories"]["date"]["example"]
        ('Friday, May 3, 2024', 'Freitag, 3. Mai 2024')
    """
    splits = _split_pairs(seed)
    category_of = _categories(seed)
    categories = {}
    for name, (_, description, example) in BUILTIN_CATEGORIES.items():
        counts = {
            split: sum(category_of[source] == name for source, _ in pairs)
            for split, pairs in splits.items()
        }
        categories[name] = {
            "description": description,
            "example": example,
            "pairs": counts,
        }
    return {
        "categories": categories,
        "splits": {split: len(pairs) for split, pairs in splits.items()},
        "versions": {
            "babel": babel.__version__,
            "cldr": babel.core.get_cldr_version(),
            "num2words": _package_version("num2words"),
        },
    }


# -- Generation -------------------------------------------------------------


@functools.cache
def _pool(seed: int) -> tuple[tuple[tuple[str, str, str], ...], ...]:
    """All (source, target, category) triples, one tuple per category."""
    rng = random.Random(seed)
    total = sum(SPLIT_SIZES.values())
    seen: set[str] = set()
    pools = []
    for name, (share, _, _) in BUILTIN_CATEGORIES.items():
        quota = round(share * total)
        sample = _SAMPLERS[name]
        pool = []
        attempts = 0
        while len(pool) < quota:
            attempts += 1
            if attempts > 50 * quota:
                raise RuntimeError(
                    f"Could not draw {quota} distinct {name!r} pairs "
                    f"(got {len(pool)}); the installed Babel/num2words differ?"
                )
            source, target = (_clean(text) for text in sample(rng))
            if source not in seen:
                seen.add(source)
                pool.append((source, target, name))
        pools.append(tuple(pool))
    return tuple(pools)


@functools.cache
def _split_pairs(seed: int) -> dict[str, tuple[tuple[str, str], ...]]:
    triples = [triple for pool in _pool(seed) for triple in pool]
    # Quotas are rounded, so fix the total at the split sizes.
    triples = triples[: sum(SPLIT_SIZES.values())]
    random.Random(seed + 1).shuffle(triples)
    splits = {}
    start = 0
    for split in ("test", "val", "train"):
        end = start + SPLIT_SIZES[split]
        splits[split] = tuple((s, t) for s, t, _ in triples[start:end])
        start = end
    return {split: splits[split] for split in SPLIT_SIZES}


@functools.cache
def _categories(seed: int) -> dict[str, str]:
    return {source: name for pool in _pool(seed) for source, _, name in pool}


# CLDR puts no-break and narrow no-break spaces in some patterns
# ("3:45\u202fPM", "12,50\xa0€"); plain spaces keep the text simple.
# These are all characters of Unicode category Zs (space separators).
_SPACE_SEPARATORS = str.maketrans(
    dict.fromkeys(
        "\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
        "\u2007\u2008\u2009\u200a\u202f\u205f\u3000",
        " ",
    )
)


def _clean(text: str) -> str:
    return text.translate(_SPACE_SEPARATORS)


@functools.cache
def _words(number: int, lang: str, to: str = "cardinal") -> str:
    return num2words.num2words(number, lang=lang, to=to)


def _random_date(rng: random.Random) -> datetime.date:
    start = datetime.date(1900, 1, 1).toordinal()
    end = datetime.date(2099, 12, 31).toordinal()
    return datetime.date.fromordinal(rng.randint(start, end))


def _sample_date(rng: random.Random) -> tuple[str, str]:
    date = _random_date(rng)
    form = rng.choice(("long", "full"))
    return (
        babel.dates.format_date(date, form, locale=_EN),
        babel.dates.format_date(date, form, locale=_DE),
    )


# Days in each month of a leap year, so that February 29 occurs.
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _sample_day_of_month(rng: random.Random) -> tuple[str, str]:
    month = rng.randint(1, 12)
    month_en, month_de = _names("month")[month - 1]
    days = _MONTH_DAYS[month - 1]
    day = rng.randint(1, days)
    ordinal_en, ordinal_de = _words(day, "en", "ordinal"), _words(day, "de", "ordinal")
    form = rng.randrange(7)
    if form == 0:
        return f"the {ordinal_en} of {month_en}", f"der {ordinal_de} {month_de}"
    if form == 1:
        return f"on the {ordinal_en} of {month_en}", f"am {ordinal_de}n {month_de}"
    if form == 2:
        return (
            f"since the {ordinal_en} of {month_en}",
            f"seit dem {ordinal_de}n {month_de}",
        )
    if form == 3:
        return (
            f"until the {ordinal_en} of {month_en}",
            f"bis zum {ordinal_de}n {month_de}",
        )
    if form == 4:
        first = rng.randint(1, days - 1)
        last = rng.randint(first + 1, days)
        return (
            f"from the {_words(first, 'en', 'ordinal')} to the "
            f"{_words(last, 'en', 'ordinal')} of {month_en}",
            f"vom {_words(first, 'de', 'ordinal')}n bis zum "
            f"{_words(last, 'de', 'ordinal')}n {month_de}",
        )
    numeral = _words(day, "en", "ordinal_num")
    if form == 5:
        return f"the {numeral} of {month_en}", f"der {day}. {month_de}"
    return f"on {month_en} {numeral}", f"am {day}. {month_de}"


def _sample_time(rng: random.Random) -> tuple[str, str]:
    time = datetime.time(rng.randrange(24), rng.randrange(60))
    en = babel.dates.format_time(time, "short", locale=_EN)
    de = babel.dates.format_time(time, "short", locale=_DE)
    if rng.random() < 0.5:
        return f"at {en}", f"um {de} Uhr"
    return en, de


# unit -> (seconds, largest count that Babel keeps in this unit)
_DURATIONS = {
    "second": (1, 59),
    "minute": (60, 59),
    "hour": (3600, 23),
    "day": (86400, 6),
    "week": (604800, 4),
    "month": (2592000, 11),
    "year": (31536000, 99),
}


def _sample_relative_time(rng: random.Random) -> tuple[str, str]:
    unit = rng.choice(tuple(_DURATIONS))
    seconds, largest = _DURATIONS[unit]
    count = rng.randint(1, largest)
    sign = rng.choice((1, -1))
    delta = datetime.timedelta(seconds=sign * count * seconds)
    en, de = (
        babel.dates.format_timedelta(
            delta, granularity=unit, threshold=1, add_direction=True, locale=locale
        )
        for locale in (_EN, _DE)
    )
    if count > 1 and rng.random() < 0.5:
        # Spell the number: "in 3 days" -> "in three days".
        en = en.replace(str(count), _words(count, "en"), 1)
        de = de.replace(str(count), _words(count, "de"), 1)
    return en, de


def _sample_number(rng: random.Random) -> tuple[str, str]:
    number = rng.randrange(10000) if rng.random() < 0.5 else rng.randrange(1000)
    return _words(number, "en"), _words(number, "de")


_UNITS = (
    "length-kilometer",
    "length-meter",
    "length-centimeter",
    "length-mile",
    "mass-kilogram",
    "mass-gram",
    "volume-liter",
    "duration-hour",
    "duration-minute",
    "duration-day",
    "duration-week",
    "duration-month",
    "duration-year",
    "temperature-celsius",
    "speed-kilometer-per-hour",
)


def _sample_quantity(rng: random.Random) -> tuple[str, str]:
    unit = rng.choice(_UNITS)
    count = rng.randint(1, 999) if rng.random() < 0.6 else rng.randint(1, 20)
    en, de = (
        babel.units.format_unit(count, unit, length="long", locale=locale)
        for locale in (_EN, _DE)
    )
    if count > 1 and rng.random() < 0.5:
        # German "one" agrees in gender with the unit (ein/eine), which CLDR
        # does not give, so only counts above one are spelt out.
        en = en.replace(str(count), _words(count, "en"), 1)
        de = de.replace(str(count), _words(count, "de"), 1)
    return en, de


_CURRENCIES = ("EUR", "USD", "GBP", "CHF", "JPY")


def _sample_money(rng: random.Random) -> tuple[str, str]:
    currency = rng.choice(_CURRENCIES)
    digits = rng.choice((2, 3, 4, 6))
    if currency == "JPY":
        amount = decimal.Decimal(rng.randrange(1, 10**digits))
    else:
        amount = decimal.Decimal(rng.randrange(1, 10**digits)) / 100
    form = rng.choice(("standard", "name"))
    return tuple(
        babel.numbers.format_currency(amount, currency, locale=locale, format_type=form)
        for locale in (_EN, _DE)
    )


# CLDR region codes of two letters that are not countries or territories.
_NOT_TERRITORIES = frozenset({"EU", "EZ", "UN", "QO", "XA", "XB", "ZZ"})


@functools.cache
def _countries() -> tuple[tuple[str, str], ...]:
    """CLDR country and territory names of one word of letters."""
    countries = []
    for code, name_en in sorted(_EN.territories.items()):
        name_de = _DE.territories.get(code)
        if len(code) != 2 or not code.isalpha() or code in _NOT_TERRITORIES:
            continue
        if name_de is not None and all(name.isalpha() for name in (name_en, name_de)):
            countries.append((name_en, name_de))
    return tuple(countries)


@functools.cache
def _names(kind: str) -> tuple[tuple[str, str], ...]:
    """(English, German) CLDR names of weekdays, months or countries."""
    if kind == "weekday":
        return tuple(
            (_EN.days["format"]["wide"][d], _DE.days["format"]["wide"][d])
            for d in range(7)
        )
    if kind == "month":
        return tuple(
            (_EN.months["format"]["wide"][m], _DE.months["format"]["wide"][m])
            for m in range(1, 13)
        )
    return _countries()


def _sample_list(rng: random.Random) -> tuple[str, str]:
    kind = rng.choice(("weekday", "month", "country", "country"))
    items = rng.sample(_names(kind), rng.choice((2, 3)))
    return (
        babel.lists.format_list([en for en, _ in items], locale=_EN),
        babel.lists.format_list([de for _, de in items], locale=_DE),
    )


_SAMPLERS: dict[str, Callable[[random.Random], tuple[str, str]]] = {
    "date": _sample_date,
    "day_of_month": _sample_day_of_month,
    "time": _sample_time,
    "relative_time": _sample_relative_time,
    "number": _sample_number,
    "quantity": _sample_quantity,
    "money": _sample_money,
    "list": _sample_list,
}


def _package_version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "unknown"
