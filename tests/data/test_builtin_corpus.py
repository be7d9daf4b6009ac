import re

import pytest
import tensorflow as tf

from keras_transformer.data import (
    BUILTIN_CATEGORIES,
    Tokenizer,
    builtin_corpus,
    builtin_corpus_info,
)
from keras_transformer.data import builtin as builtin_module

SPLITS = ("train", "val", "test")


@pytest.fixture(scope="module")
def corpora():
    return {split: builtin_corpus(split) for split in SPLITS}


@pytest.fixture(scope="module")
def category_of():
    return builtin_module._categories(0)


def test_sizes_and_distinct_pairs(corpora):
    assert {s: len(c) for s, c in corpora.items()} == {
        "train": 24000,
        "val": 1000,
        "test": 1000,
    }
    pairs = {pair for corpus in corpora.values() for pair in corpus}
    assert len(pairs) == 26000 >= 20000


def test_splits_are_disjoint_on_source(corpora):
    sources = [set(c.sources) for c in corpora.values()]
    assert sum(len(s) for s in sources) == len(set.union(*sources)) == 26000


def test_deterministic_for_a_seed_and_different_across_seeds(corpora):
    # Regenerate from scratch rather than from the in-process cache.
    builtin_module._pool.cache_clear()
    builtin_module._split_pairs.cache_clear()
    builtin_module._categories.cache_clear()
    assert builtin_corpus("test", seed=0) == corpora["test"]
    other = builtin_corpus("test", seed=1)
    assert len(set(other.sources) & set(corpora["test"].sources)) < 100


def test_max_pairs_takes_a_prefix(corpora):
    assert builtin_corpus("val", max_pairs=10).sources == corpora["val"].sources[:10]


def test_unknown_split():
    with pytest.raises(ValueError, match="'dev'"):
        builtin_corpus("dev")


def test_every_category_is_in_every_split(corpora, category_of):
    for split, corpus in corpora.items():
        found = {category_of[source] for source in corpus.sources}
        assert found == set(BUILTIN_CATEGORIES), split
    info = builtin_corpus_info()
    for split, size in info["splits"].items():
        counts = [c["pairs"][split] for c in info["categories"].values()]
        assert sum(counts) == size


def test_text_is_clean(corpora):
    for corpus in corpora.values():
        for text in corpus.texts():
            assert text and text == Tokenizer.normalize(text)
            assert not re.search(r"[\u00a0\u202f\t\n]", text)


def by_category(corpora, category_of, name):
    return [
        pair
        for corpus in corpora.values()
        for pair in corpus
        if category_of[pair[0]] == name
    ]


def test_times_use_the_24_hour_clock(corpora, category_of):
    pairs = by_category(corpora, category_of, "time")
    assert len(pairs) > 1000
    for en, de in pairs:
        hour, minute, half = re.fullmatch(
            r"(?:at )?(\d{1,2}):(\d\d) (AM|PM)", en
        ).groups()
        hour = int(hour) % 12 + (12 if half == "PM" else 0)
        expected = f"{hour:02d}:{minute}"
        assert de in (expected, f"um {expected} Uhr"), (en, de)
        assert en.startswith("at ") == de.startswith("um ")


def test_dates_reorder_day_and_month(corpora, category_of):
    months = {en: de for en, de in builtin_module._names("month")}
    days = {en: de for en, de in builtin_module._names("weekday")}
    pairs = by_category(corpora, category_of, "date")
    assert len(pairs) > 4000
    for en, de in pairs:
        weekday, month, day, year = re.fullmatch(
            r"(?:(\w+), )?(\w+) (\d{1,2}), (\d{4})", en
        ).groups()
        expected = f"{day}. {months[month]} {year}"
        if weekday:
            expected = f"{days[weekday]}, {expected}"
        assert de == expected


def test_day_phrases_agree_with_their_preposition(corpora, category_of):
    articles = {"the": "der ", "on the": "am ", "since the": "seit dem "}
    for en, de in by_category(corpora, category_of, "day_of_month"):
        if re.fullmatch(r"(the|on the|since the) [a-z-]+ of \w+", en):
            prefix = articles[en.rsplit(" ", 3)[0]]
            assert de.startswith(prefix), (en, de)
            # Nominative "-e" after der, dative "-en" after am / seit dem.
            ending = "e" if prefix == "der " else "en"
            assert de.split()[-2].endswith(ending), (en, de)


def test_numbers_are_single_german_words(corpora, category_of):
    pairs = by_category(corpora, category_of, "number")
    assert len(pairs) > 3000
    assert all(" " not in de and de.islower() for _, de in pairs)


def test_lists_drop_the_serial_comma(corpora, category_of):
    for en, de in by_category(corpora, category_of, "list"):
        items = en.count(",") + 1 if "," in en else 2
        assert de.count(",") == items - 2 and de.count(" und ") == 1, (en, de)


def test_relative_times_move_ago_to_vor(corpora, category_of):
    for en, de in by_category(corpora, category_of, "relative_time"):
        assert en.endswith(" ago") == de.startswith("vor "), (en, de)
        assert en.startswith("in ") == de.startswith("in "), (en, de)


def test_documented_examples_match_the_packages():
    import datetime

    import babel.dates
    import babel.lists
    import babel.numbers
    from num2words import num2words

    examples = {name: example for name, (_, _, example) in BUILTIN_CATEGORIES.items()}
    date = datetime.date(2024, 5, 3)
    assert examples["date"] == (
        babel.dates.format_date(date, "full", locale="en"),
        babel.dates.format_date(date, "full", locale="de"),
    )
    assert examples["number"] == (num2words(342, lang="en"), num2words(342, lang="de"))
    money = tuple(
        builtin_module._clean(babel.numbers.format_currency(1234.5, "USD", locale=lc))
        for lc in ("en", "de")
    )
    assert examples["money"] == money
    assert examples["list"] == (
        babel.lists.format_list(["France", "Austria", "Spain"], locale="en"),
        babel.lists.format_list(["Frankreich", "Österreich", "Spanien"], locale="de"),
    )


@pytest.mark.slow
def test_pairs_are_short_in_subword_tokens(corpora):
    # The default vocabulary size (8000 asked; the corpus allows fewer).
    tokenizer = Tokenizer.train(corpora["train"], max_sentences=10000)
    for corpus in corpora.values():
        for texts in (corpus.sources, corpus.targets):
            lengths = tokenizer.tokenize(tf.constant(texts)).row_lengths()
            assert int(tf.reduce_max(lengths)) <= 24
