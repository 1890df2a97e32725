"""The string-side readings the comparison of two parts uses: brackets, option letters, words, units, times,
long printed decimals, plain integer fractions (decided without math-verify), and whether a gold is an answer.

Standard library only (the math workers load these modules without the trl_ext package, which imports torch).
"""

import re
from decimal import Decimal
from fractions import Fraction

from trl_ext.rewards._math_extract import split_top_level
from trl_ext.rewards._math_normalise import _SPACING, _TEXT_COMMANDS, unwrap_text

_PLAIN_FRACTION = re.compile(
    r"([-+]?)\s*(?:(\d+)|\\[dt]?frac\s*\{\s*([-+]?\d+)\s*\}\s*\{\s*([-+]?\d+)\s*\}|(\d+)\s*/\s*(\d+))"
)
_LONG_DECIMAL = re.compile(r"([-+]?)(\d*)\.(\d+)(?:(?:\\times|\\cdot|\*)10\^\{?([-+]?\d+)\}?|[eE]([-+]?\d+))?")
_TIME = re.compile(r"(\d{1,2}):(\d\d)(?::(\d\d))?\s*(?:\\,|~)?\s*([ap])?\.?\s*(?:m\b\.?)?", re.IGNORECASE)
_OPTION = re.compile(r"^\(([a-e])\)$|^([a-e])\)?$")
_OPTION_PREFIX = re.compile(r"^\(([a-e])\)")
_NOT_AN_ANSWER = re.compile(r"\b(?:proof|prove[dn]?|shown?|see|omitted|n/a|none given)\b")
_UNIT_ALIASES = {
    "centimeter": "cm", "centimetre": "cm", "meter": "m", "metre": "m", "kilometer": "km", "kilometre": "km",
    "millimeter": "mm", "millimetre": "mm", "inch": "in", "inche": "in", "foot": "ft", "feet": "ft",
    "second": "s", "sec": "s", "minute": "min", "hour": "h", "hr": "h", "kilogram": "kg", "gram": "g",
    "degree": "deg", "dollar": "$", "liter": "l", "litre": "l", "mile": "mi", "yard": "yd", "unit": "",
}  # fmt: skip
_SHORT_UNITS = {"cm", "m", "km", "mm", "in", "ft", "s", "min", "h", "hr", "hrs", "kg", "g", "mi", "yd", "l", "ml", "deg"}  # fmt: skip
_QUALIFIERS = {  # hedges, and number or operation words (they change the value: never a unit)
    "or", "and", "if", "when", "where", "for", "more", "less", "least", "most", "not", "only", "approximately",
    "approx", "about", "around", "at", "than", "all", "any", "each", "every", "but", "also", "unless", "otherwise",
    "is", "are", "be", "odd", "even", "none", "no", "yes", "exactly", "nearly", "roughly", "over", "under", "maybe",
    "probably", "ish", "plus", "minus", "times", "squared", "cubed", "percent", "lcm", "gcd", "mod", "log", "hundred",
    "thousand", "million", "billion", "trillion", "dozen", "half", "halves", "third", "thirds", "quarter", "quarters",
    "fourths", "tenths", "hundredths", "thousandths", "pi",
}  # fmt: skip
_UNIT_TAIL = re.compile(
    r"(?:(?:\\[,;: ]|~|\s)*" + _TEXT_COMMANDS + r"\s*\{\s*([A-Za-z][A-Za-z ./]*?)\s*\}"  # 5\textbf{ cm}
    r"|(?<=[\d}])\s+([A-Za-z]+(?:\s+[A-Za-z]+){0,2})"  # 5 cm, 10 square units
    r"|(?<=\d)([a-z]{2,}))"  # 5cm, 10weeks
    r"\s*((?:\^\s*\{?\s*[23]\s*\}?)?)\s*\.?\s*$"
)


def outer_brackets(part: str) -> str | None:
    """The bracket pair around a whole tuple or interval (``(]`` for ``(-\\infty, 2]``), or None. math-verify
    reads both ``(2, -1)`` and ``[2, -1]`` as the tuple (2, -1) once the ends are not increasing."""
    text = _SPACING.sub("", part)
    if len(text) < 2 or text[0] not in "([" or text[-1] not in ")]":
        return None
    depth = 0
    for pos, char in enumerate(text):
        depth += 1 if char in "([{" else -1 if char in ")]}" else 0
        if depth == 0 and pos < len(text) - 1:
            return None  # the first bracket closes early: (a, b) \cup (c, d)
    return text[0] + text[-1] if len(split_top_level(text[1:-1])) > 1 else None


def printed_decimal(part: str) -> Decimal | None:
    """The exact value of a decimal printed with 6 or more significant digits (``2.314814814815 \\times 10^{-3}``):
    such a gold is rounded, equal to an exact answer that rounds to it. A short decimal (``0.33``) is exact: None."""
    match = _LONG_DECIMAL.fullmatch(_SPACING.sub("", part))
    if match is None or len((match.group(2) + match.group(3)).lstrip("0")) < 6:
        return None
    return Decimal(f"{match.group(1)}{match.group(2) or 0}.{match.group(3)}e{match.group(4) or match.group(5) or 0}")


def time_of_day(part: str) -> tuple[int, int, int] | None:
    """(hours, minutes, seconds) of a time written ``20:34``, ``20:34:00`` or ``8:34 \\text{P.M.}``, else None."""
    match = _TIME.fullmatch(_SPACING.sub(" ", unwrap_text(part)).strip())
    if match is None:
        return None
    hours, minutes, seconds = int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)
    if match.group(4):
        if not 1 <= hours <= 12:
            return None
        hours = hours % 12 + (12 if match.group(4).lower() == "p" else 0)
    return (hours, minutes, seconds) if hours < 24 and minutes < 60 and seconds < 60 else None


def is_word_answer(part: str) -> bool:
    """True for an answer made of words (``\\text{Monday}``, ``odd``, ``all real numbers``), which is compared
    as a string: letters only, and a word of 3+ letters, a capitalised word or a ``\\text{}`` of 2+ letters
    (``ab`` and ``AB`` stay products)."""
    unwrapped = unwrap_text(part).strip().rstrip(".")
    if not unwrapped or not re.fullmatch(r"[A-Za-z][A-Za-z' \-]*", unwrapped):
        return False
    longest = max(len(word) for word in re.findall(r"[A-Za-z]+", unwrapped))
    capitalised = re.fullmatch(r"[A-Z][a-z]+", unwrapped) is not None  # "No", "On"; "AB" and "ab" are products
    return longest >= 3 or (longest >= 2 and (capitalised or unwrapped != part.strip().rstrip(".")))


def looks_like_an_answer(part: str) -> bool:
    """False for golds that are not answers at all ("See the proof above.", a sentence): no proof words, at most
    six words outside LaTeX commands, at most 200 characters. (Such text would parse as a product of letters.)"""
    words = re.findall(r"(?<![\\A-Za-z])[A-Za-z]{2,}", unwrap_text(part))
    return len(words) <= 6 and len(part) <= 200 and not _NOT_AN_ANSWER.search(unwrap_text(part).lower())


def option_letter(part: str, strict: bool) -> str | None:
    """The option letter of a multiple-choice answer: ``(C)``, ``\\text{(C)}``, ``C`` (upper case only when
    ``strict``, i.e. for the gold, where a bare lower-case letter is a variable; an answer may also give the
    option's text after the letter: ``(C) 12``), or None."""
    key = _SPACING.sub("", unwrap_text(part)).rstrip(".")
    if strict and len(key) == 1 and not key.isupper():
        return None
    match = _OPTION.match(key.lower())
    if match is None and not strict and not re.search(r"\([A-Ea-e]\)|\b(?:or|and)\b", key[3:]):
        match = _OPTION_PREFIX.match(key.lower())  # "(C) 12", but not "(C) or (D)"
    return next(group for group in match.groups() if group) if match else None


def split_unit(part: str) -> tuple[str, str | None]:
    """(value, unit) of a number followed by a unit (``5\\text{ cm}``, ``5 m``, ``12\\text{ cm}^2``); the unit is
    normalised (``centimeters`` -> ``cm``), None when there is none. Only a plain number may carry a unit, and
    never a qualifier (``2\\text{ or more}``, ``3\\text{ if } n`` keep their text). This replaces math-verify's
    unit stripping, which also reads ``3t``, ``2d`` and ``2\\text{ or more}`` as plain numbers."""
    match = _UNIT_TAIL.search(part)
    if match is None:
        return part, None
    head = part[: match.start()].rstrip()
    if re.search(r"[A-Za-z]", re.sub(r"\\[A-Za-z]+", "", head)) or not re.search(r"\d", head):
        return part, None
    wrapped, spaced, glued, power = match.groups()
    words = re.findall(r"[A-Za-z]+", (wrapped or spaced or glued).lower())
    if len(words) > 3 or any(word in _QUALIFIERS for word in words):
        return part, None
    word = "".join(words)
    function = re.match(r"(?:arc)?(?:sin|cos|tan|sec|csc|cot|log|ln|exp|sqrt)", word)  # 2sinx is not a unit
    short = len(word) < 3 or (glued and (len(word) < 4 or function or not re.search("[aeiouy]", word)))
    if short and word not in _SHORT_UNITS:  # 3t, 2xy, 5abc stay products; 5cm, 10weeks are units
        return part, None
    stem = word[:-2] if word.endswith("ches") else word[:-1] if word.endswith("s") and len(word) > 3 else word
    return head, _UNIT_ALIASES.get(stem, stem) + re.sub(r"[\s{}^]", "", power)


def plain_fraction(part: str) -> Fraction | None:
    """The value of a plain integer or integer fraction (``-12``, ``073``, ``\\frac{3}{4}``, ``6/8``), else None.

    A fast path, not a parser: math-verify's LaTeX parse costs milliseconds, and two such values have one
    verdict, exact equality, which is what math-verify gives them too. Anything else goes to math-verify."""
    match = _PLAIN_FRACTION.fullmatch(part.strip())
    if match is None:
        return None
    sign, integer, numerator, denominator, slash_numerator, slash_denominator = match.groups()
    top, bottom = int(integer or numerator or slash_numerator), int(denominator or slash_denominator or 1)
    if bottom == 0:
        return None
    value = Fraction(top, bottom)
    return -value if sign == "-" else value


def fraction_verdict(gold: tuple[str, ...], answer: tuple[str, ...], ordered: bool = False) -> bool | None:
    """The verdict when every gold and answer part is a plain integer or integer fraction (the same multiset of
    values, or the same sequence when ``ordered``; when the answer has more parts than the gold, a value it
    writes twice counts once, unless ordered), else None (the workers decide)."""
    gold_values = [plain_fraction(part) for part in gold]
    answer_values = [plain_fraction(part) for part in answer]
    if None in gold_values or None in answer_values:
        return None
    if len(answer_values) > len(gold_values) and not ordered:  # a sequence written with an extra entry is another
        answer_values = list(dict.fromkeys(answer_values))
    return answer_values == gold_values if ordered else sorted(answer_values) == sorted(gold_values)
