"""The answer a completion without a box states after an anchor ("The final answer is $3$.", "Answer: 3").

The final answer is the last anchored statement, and only when nothing else in the region puts it in doubt: the
sentence holding the anchor begins with framing words alone ("Therefore, the final answer is"; a condition, a
person who says it, a negation or a quote before the anchor makes it no answer), what follows that sentence is
only closing words ("I hope it is correct."; a retraction, a number in words, a hedge makes it no answer), and
every earlier anchored statement that states an answer states the same one (two different anchored answers are no
answer, as two boxes are two parts). The anchored sentence itself must be complete: math (in ``$...$``,
``\\(...\\)``, ``\\[...\\]``, or a plain-text expression) that ends its sentence, with only what a whitelist allows
around it: list separators between several math spans, a unit after a number (a known unit or a count noun, as
``split_unit`` reads it), closing punctuation. A word before the number ("negative 3", "under 3"), after it
("3 at most", "3 thousand") or a hedge ("or", "probably", "?") makes it no answer. When unsure there is no answer:
a right answer may score 0, a wrong one never 1. The accepted text is then graded exactly like the content of a
box.

math-verify's own anchors are not used for this: they read the first value up to 50 characters after "answer"
("answer is unknown; 3 is a guess" is 3) and ignore what follows it.

Standard library only (the math workers load these modules without the trl_ext package, which imports torch).
"""

import re

from trl_ext.rewards._math_compare import split_unit
from trl_ext.rewards._math_extract import MAX_ANSWER_CHARS, split_parts
from trl_ext.rewards._math_normalise import ambiguous_latex, latin_letters

# "the final answer is", "Answer:", "the answer to the problem would be", "**Answer:**", "Answer $9$"; GSM8K's
# answer line ("#### 18" at the start of a line: a Markdown heading of four marks, read as any anchored statement)
_ANCHOR = re.compile(
    r"\banswer\b(?:\s+to\s+(?:the|this|our|your)\s+(?:question|problem)\b)?(?:\*\*|__)?[ \t]*"
    r"(?:(?:is|was|would\s+be|will\s+be|should\s+be)\b[ \t]*:?|:|=|(?=[ \t]*(?:\$|\\[(\[])))(?:\*\*|__)?"
    r"|^[ \t]*####(?=[ \t]+[^\s#])",
    re.IGNORECASE | re.MULTILINE,
)
_BOXED = re.compile(r"\\(?:boxed|fbox|framebox|f?colorbox|bbox)(?![A-Za-z])")
# inline math ($...$, \\(...\\)) stays on one line; display math ($$...$$, \\[...\\]) may span lines
_MATH_SPAN = re.compile(
    r"(?<!\\)\$\$(.+?)(?<!\\)\$\$|(?<!\\)\$([^\n]+?)(?<!\\)\$|\\\(([^\n]+?)\\\)|\\\[(.+?)\\\]", re.DOTALL
)
# inline math wrapped in one more pair of dollars ("$$28$ %$" is "$28$ %" wrapped again: TeX has no math inside
# math, the outer pair is no display math); "$$x$$" and "$$x$ y$$" are display math, left alone
_REWRAPPED_MATH = re.compile(r"(?<![\\$])\$\$([^$\n]+?)(?<!\\)\$([^$\n]+?)(?<!\\)\$(?!\$)")
_MATH_OPEN = re.compile(r"(?<!\\)\$|\\[(\[]")
# a dollar sign before a number that no dollar closes on its line: money ("The answer is $18."), not math, as a
# Markdown renderer shows it
_CURRENCY = re.compile(r"(?<!\\)\$(?=\d[^$\n]*$)", re.MULTILINE)
_SENTENCE_END = re.compile(r"\.(?=\s|\*|$)|\n")
_LEADING = re.compile(r"[\s:*#]*")  # "The answer is #### 42" (GSM8K's marker)
# words that make a stated answer a guess or one of several; a question mark
_HEDGE = re.compile(
    r"\b(?:or|either|maybe|perhaps|possibly|probably|likely|unlikely|alternatively|unless|if|not|guess|unsure|"
    r"uncertain|approximately|roughly|about|around|nearly|almost|could|might|but|except|wrong|incorrect|instead|"
    r"actually|otherwise|vs|xor)\b|n't\b|\?",
    re.IGNORECASE,
)
# what an anchored statement that begins with a value begins with: a number, a sign, math, an option letter
_STATED_VALUE = re.compile(r"[-+\u2212]?\s*(?:\d|(?<!\\)\$|\\[(\[]|\(\s*[A-Za-z]\s*\)|[A-Z](?![A-Za-z]))")
# what a plain-text answer may be written with (no ; | & ~ # and no other script: "3 | 4", "3 ~ 4", "3 – 4"); a $
# left in plain text is escaped (\$5): an unescaped one opens math
_PLAIN_CHARS = re.compile(r"[A-Za-z0-9 +\-*/^()\[\]{}.,=\\_!%<>'$]+")
_PERCENT_WORD = re.compile(r"\s*\b(?:percent|per\s+cent|pct)\b|\s*(?<!\\)%")
# an anchor after the answer it names: "Thus $x \\le 2$ is our answer.", "Therefore $x \\ge 5$ is the solution."
# what stands before and after the noun of a "<math> is the answer." anchor (found from the noun: a scan of the
# whole region for the pattern doubled the anchored extraction's time)
_TRAILING_LEAD = re.compile(r"(?:\$|\\\))(\s+(?:is|are)\s+(?:the|our|my)\s+(?:final\s+)?)$", re.I)
_TRAILING_WORDS = ("the", "our", " my", "nal")
_TRAILING_NOUN = re.compile(r"(?:answer|solution)s?\s*(?:\.|\n|$)", re.I)
_IS_THE_ANSWER = re.compile(r"\s+(?:is|are)\s+(?:the|our|my)\s+(?:final\s+)?(?:solution|answer|result)s?\s*$", re.I)
# what ends the lead of an answer sentence ("The largest $n$ is", "Here is a zero matrix:")
_CONNECTOR = re.compile(r"\b(?:is|are|was|were|be|equals)\b|:")
_MODAL_BEFORE_CONNECTOR = re.compile(r"\b(?:could|might|may)\s+(?:be|equal)\s*:?\s*$", re.I)
_DISCOURSE = re.compile(
    r"(?:(?:therefore|thus|so|hence|then|finally|we|find|found|get|obtain|have|that|this|gives|which)[\s,]*)*", re.I
)
_LIST_JOIN = re.compile(r",?\s*(?:and)?\s*,?")
_UNIT_TAIL = re.compile(r"[A-Za-z]+(?:\s*/\s*[A-Za-z]+|\s+[A-Za-z]+)*")
_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")
MAX_ANCHORS = 16
_ANSWER_WORDS = 8  # an earlier anchored sentence of more words (outside math) is prose, not a stated answer
# the start of a sentence: a line break, an end mark followed by a space (a decimal point is none), the end of
# display math (\end{align*}, \], $$); not a semicolon ("Assume n is odd; the answer is 3" is one sentence)
_SENTENCE_BREAK = re.compile(r"[.!?](?=\s)|\n|\\end\{[A-Za-z*]+\}|\\\]|\$\$")
# a word, a chat template's special token (<|im_start|>), or one other character (a digit, $, a quote, a letter
# of another script)
_TOKEN = re.compile(r"[A-Za-z]+|<\|[A-Za-z_]+\|>|\S")
_LEAD_MAX_CHARS, _TAIL_MAX_CHARS = 160, 300
# what a sentence may say before its anchor: discourse and framing words ("Therefore, the final answer is",
# "**Final Answer:** The answer is"); never a condition, a person, a verb of saying or a negation
_LEAD_WORDS = frozenset(
    {
        "therefore", "thus", "so", "hence", "finally", "and", "overall", "consequently", "altogether", "clearly",
        "in", "conclusion", "summary", "short", "the", "our", "my", "final", "correct", "required",
        "requested", "desired", "resulting", "answer", "answers", "we", "get", "have", "see", "that",
        "this", "means", "gives", "it", "follows", "is",
    }
)  # fmt: skip
_LEAD_PUNCTUATION = ",:*#_>-"
# what may follow the answer's sentence: closing remarks ("I hope it is correct.", "This completes the solution.")
_CLOSING_WORDS = frozenset(
    {
        "i", "we", "hope", "it", "its", "this", "that", "is", "the", "our",
        "my", "solution", "answer", "result", "final", "correct", "complete", "completes", "verified", "checks",
        "out", "done", "end", "qed", "and", "problem", "solved", "proof", "helps", "user", "assistant",
    }
)  # fmt: skip
_CLOSING_PUNCTUATION = ".,:!*#_>-"
# the symbols a plain-text answer may use, as LaTeX (3² is 9, −3 is -3)
_SYMBOLS = str.maketrans(
    {
        "\u2212": "-", "\u00d7": "\\times ", "\u00f7": "\\div ", "\u00b1": "\\pm ", "\u2213": "\\mp ",
        "\u03c0": "\\pi ", "\u00b0": "^\\circ ", "\u00b2": "^{2}", "\u00b3": "^{3}", "\u221a": "\\sqrt ",
        "\u221e": "\\infty ", "\u2264": "\\le ", "\u2265": "\\ge ", "\u2260": "\\ne ", "\u00b7": "\\cdot ",
    }
)  # fmt: skip


def anchored_parts(region: str) -> tuple[str, ...] | None:
    """The parts of the answer stated after the last anchor of ``region`` (a region without a box), or None
    when there is none or it is not a complete answer (see the module docstring)."""
    text = anchored_answer(region)
    if text is None or ambiguous_latex(text):
        return None
    return tuple(split_parts(text)) or None


def anchored_answer(region: str) -> str | None:
    """The text of the answer stated after the last anchor of ``region``, written as the content of a box
    (``$1$ and $2$`` -> ``1, 2``; ``$3$ hours`` -> ``3 hours``), or None.

    The final answer is the last anchored statement, taken only when (1) its sentence begins with framing words
    alone ("Therefore, the final answer is"; no condition, attribution, quote or number before the anchor),
    (2) its own sentence is a complete answer, (3) nothing after that sentence but closing words ("I hope it is
    correct."; no retraction, number or hedge) and (4) every earlier anchored statement that states an answer
    states the same one. Anything else is no answer: a right answer may score 0, a wrong one never 1."""
    if _BOXED.search(region):
        return None  # a box is the answer (an empty or refused one included): never an anchor around it
    region = _REWRAPPED_MATH.sub(r"$\1$\2", region) if "$$" in region else region
    anchors = []
    for anchor in _ANCHOR.finditer(region):
        anchors.append(anchor)
        if len(anchors) > MAX_ANCHORS:
            return None  # a repetition loop, not a stated answer
    trailing = _trailing_anchors(region)
    if trailing is None:
        return None  # a repetition loop
    if trailing and (not anchors or trailing[-1].start() > anchors[-1].end()):
        answer = _trailing_statement(region, anchors, trailing.pop())
    else:
        answer = _anchored_statement(region, anchors)
    if answer is None:
        return None
    return answer if all(_same_answer(_math_before(region, match), answer) for match in trailing) else None


def _anchored_statement(region: str, anchors: list[re.Match]) -> str | None:
    """The answer stated after the last of ``anchors`` (see ``anchored_answer``), or None."""
    if not anchors or not _framing_lead(region, anchors[-1].start()):
        return None  # "If n is even, the answer is 3", "My friend says the answer is 3"
    answer, end = _statement(region, anchors[-1].end())
    if answer is None or not _closing_only(region, end):
        return None  # "3. Or 4.", "$3$. Wait, no: four."
    return answer if _earlier_statements_agree(region, anchors, answer) else None


class _Span:
    """Where a "<math> is the answer." anchor lies, read as a match is (``start()``, ``end()``)."""

    __slots__ = ("_start", "_end")

    def __init__(self, start: int, end: int) -> None:
        self._start, self._end = start, end

    def start(self) -> int:
        return self._start

    def end(self) -> int:
        return self._end


def _trailing_anchors(region: str) -> list[_Span] | None:
    """The "<math> is the answer." anchors of ``region`` in order, or None past ``MAX_ANCHORS``."""
    lower = region.lower()
    found = []
    for noun in ("answer", "solution"):
        position = lower.find(noun)
        while position != -1:
            word = lower[max(0, position - 8) : position].rstrip()[-3:]  # "the", "our", " my", "nal" (final) first
            lead = word in _TRAILING_WORDS and _TRAILING_LEAD.search(region, max(0, position - 40), position)
            tail = _TRAILING_NOUN.match(region, position) if lead else None
            if tail:
                found.append(_Span(lead.start(1), tail.end()))
                if len(found) > MAX_ANCHORS:
                    return None
            position = lower.find(noun, position + 1)
    return sorted(found, key=_Span.start)


def _named_answer(region: str, trailing: _Span) -> tuple[str | None, int]:
    """(the answer a sentence names before its anchor, where the sentence ends), or None for the answer when the
    sentence does not name one with framing words alone before it."""
    start = _sentence_start(region, trailing.start())
    if start is None or region[start:].lstrip().startswith(">") or not _framing_label(region, start):
        return None, trailing.end()
    if _MATH_SPAN.search(region, start, trailing.start() + 1) is None:
        return None, trailing.end()  # the anchor closes math that opened before this sentence
    answer, end = _statement(region, start)
    return (answer, end) if end <= trailing.end() + 1 else (None, end)


def _math_before(region: str, trailing: _Span) -> str | None:
    """The math an earlier "<math> is the answer." names, whatever the words before it ("My friend thinks $3$ is
    the answer." states 3 as much as "The answer is 3." does); None when it is not closed math."""
    named = None
    for span in _MATH_SPAN.finditer(region, max(0, trailing.start() - MAX_ANSWER_CHARS), trailing.start()):
        named = next(group for group in span.groups() if group is not None) if span.end() == trailing.start() else None
    return named


def _same_answer(earlier: str | None, answer: str) -> bool:
    """Whether an earlier named answer (None: it names none) is ``answer``."""
    return earlier is None or earlier == answer or sorted(split_parts(earlier)) == sorted(split_parts(answer))


def _trailing_statement(region: str, anchors: list[re.Match], trailing: _Span) -> str | None:
    """The answer of a sentence that names it before its anchor ("Therefore $x \\ge 5$ is the solution."): the
    same rules as after an anchor (framing words before the math, closing words after the sentence, no earlier
    anchored answer that differs)."""
    answer, end = _named_answer(region, trailing)
    if answer is None or not _closing_only(region, end):
        return None
    return answer if _earlier_statements_agree(region, [*anchors, trailing], answer) else None


def _earlier_statements_agree(region: str, anchors: list[re.Match], answer: str) -> bool:
    """Whether no anchored statement before the last one states another answer (two anchored answers are none,
    as two boxes are two parts). An earlier statement states an answer when it begins with a value ("The answer
    is (A), (B) or (C).") or is answer-sized (at most ``_ANSWER_WORDS`` words outside math: "The answer is yes.");
    prose after an anchor ("The answer is found by counting the ways to ...") states none. An anchor followed
    only by framing words up to the next one is that statement's heading ("Final Answer: The final answer is")."""
    for anchor, after in zip(anchors, anchors[1:]):
        if _only_words(region[anchor.end() : after.start()], _LEAD_WORDS, _LEAD_PUNCTUATION):
            continue
        start = _LEADING.match(region, anchor.end()).end()
        pieces, _ = _answer_sentence(region, anchor.end())
        words = sum(len(_WORD.findall(text)) for is_math, text in pieces if not is_math)
        if not _STATED_VALUE.match(region, start) and not (pieces and words <= _ANSWER_WORDS):
            continue  # prose, or a sentence longer than an answer
        earlier = _whitelisted(pieces) if pieces else None
        if earlier is None or (earlier != answer and sorted(split_parts(earlier)) != sorted(split_parts(answer))):
            return False  # "The answer is 3.\nThe answer is 4.", "The answer is 3 or 4. The answer is 4."
    return True


def _statement(region: str, start: int) -> tuple[str | None, int]:
    """The answer stated by the sentence that starts at ``start`` (right after an anchor), or None, and where that
    sentence ends."""
    pieces, end = _answer_sentence(region, start)
    return (_whitelisted(pieces) if pieces else None), end


def _framing_lead(region: str, anchor_start: int) -> bool:
    """Whether the text from the start of the anchor's sentence to the anchor holds only framing words
    ("So, the final", "Final Answer: The"): no condition, attribution, negation, quote or number."""
    sentence_start = _sentence_start(region, anchor_start)
    if sentence_start is None:
        return False  # a sentence longer than any framing lead
    lead = region[sentence_start:anchor_start]
    if lead.lstrip().startswith(">"):
        return False  # a quoted line ("My friend wrote:\n> The answer is 5.")
    return _only_words(lead, _LEAD_WORDS, _LEAD_PUNCTUATION) and _framing_label(region, sentence_start)


def _sentence_start(region: str, position: int) -> int | None:
    """Where the sentence holding ``position`` starts, or None when it starts more than a lead's length before."""
    window_start = max(0, position - _LEAD_MAX_CHARS)
    breaks = list(_SENTENCE_BREAK.finditer(region, window_start, position))
    if not breaks and window_start > 0:
        return None
    return breaks[-1].end() if breaks else window_start


def _framing_label(region: str, sentence_start: int) -> bool:
    """Whether the line before the anchor's sentence, when it labels it (a heading, or a line ending in a colon),
    is a framing label ("## Final Answer", "**Final answer:**"), not "# Common mistake" or "The textbook claims:"."""
    before = region[max(0, sentence_start - _LEAD_MAX_CHARS) : sentence_start].rstrip()
    label = before[before.rfind("\n") + 1 :].strip()
    if not (label.startswith("#") or label.endswith(":")):
        return True
    return _only_words(label, _LEAD_WORDS, _LEAD_PUNCTUATION)


def _closing_only(region: str, end: int) -> bool:
    """Whether what follows the answer's sentence is only closing words ("I hope it is correct.")."""
    tail = region[end:]
    if len(tail) > _TAIL_MAX_CHARS and tail[_TAIL_MAX_CHARS:].strip():
        return False
    return _only_words(tail, _CLOSING_WORDS, _CLOSING_PUNCTUATION, special_tokens=True)


def _only_words(text: str, words: frozenset[str], punctuation: str, special_tokens: bool = False) -> bool:
    """Whether ``text`` is made of the given (lower-case) words and punctuation characters only (and a chat
    template's special tokens, ``<|im_start|>user``, when ``special_tokens``)."""
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token.lower() in words or token in punctuation or (special_tokens and token.startswith("<|")):
            continue
        return False
    return True


def _answer_sentence(region: str, start: int) -> tuple[list[tuple[bool, str]], int]:
    """The pieces (is_math, text) of the sentence that starts at ``start``, and where the sentence ends; no
    pieces when a math span is not closed or the sentence is longer than an answer."""
    pos = _LEADING.match(region, start).end()
    pieces: list[tuple[bool, str]] = []
    while pos < len(region):
        if pos - start > MAX_ANSWER_CHARS:
            return [], pos
        span = _MATH_SPAN.match(region, pos)
        if span:
            pieces.append((True, next(group for group in span.groups() if group is not None)))
            pos = span.end()
            continue
        if _CURRENCY.match(region, pos):
            pieces.append((False, "\\$"))
            pos += 1
            continue
        if _MATH_OPEN.match(region, pos):
            return [], pos  # a math span never closed
        end = _SENTENCE_END.search(region, pos, pos + MAX_ANSWER_CHARS)
        opening = _MATH_OPEN.search(region, pos, end.start() if end else pos + MAX_ANSWER_CHARS)
        stop = opening.start() if opening else end.start() if end else min(len(region), pos + MAX_ANSWER_CHARS + 1)
        if stop > pos:
            pieces.append((False, region[pos:stop]))
            pos = stop
        if opening is None:
            return pieces, end.end() if end else pos
    return pieces, pos


def _whitelisted(pieces: list[tuple[bool, str]]) -> str | None:
    """The answer text of a sentence's pieces when only allowed text surrounds its math, else None."""
    pieces = [(is_math, text if is_math else _PERCENT_WORD.sub(r"\\%", text)) for is_math, text in pieces]
    if len(pieces) > 1 and not pieces[-1][0]:  # "$x \ge 5$ is the solution.", "$x < 3$.."
        pieces[-1] = (False, _IS_THE_ANSWER.sub("", pieces[-1][1].rstrip().rstrip(".")))
    answer = _after_lead(pieces)
    if not answer or any(_HEDGE.search(text) for is_math, text in answer if not is_math):
        return None
    if not any(is_math for is_math, _ in answer):
        text = latin_letters("".join(text for _, text in answer).strip().strip("*").strip().translate(_SYMBOLS))
        if not text.isascii() or not _PLAIN_CHARS.fullmatch(text):
            return None
        return text if all(_plain_item(item) for item in re.split(r",|\band\b", text)) else None
    items: list[str] = []
    for position, (is_math, text) in enumerate(answer):
        text = text.strip() if is_math else text.strip().strip("*").strip()
        if is_math:
            joined = (
                items and position > 0 and answer[position - 1][0] is False and not answer[position - 1][1].strip()
            )
            items.append(f"{items.pop()} {text}" if joined else text)  # "$A$ $B$": one product
        elif not text:
            continue
        elif position == len(answer) - 1 and items and text == "\\%":
            items[-1] += text  # "$28$ percent"
        elif position == len(answer) - 1 and items and _UNIT_TAIL.fullmatch(text):
            items[-1] = f"{items[-1]} {text}"  # "$3$ hours": the unit is checked with the number
            if split_unit(items[-1])[1] is None:
                return None
        elif not items or not _LIST_JOIN.fullmatch(text):
            return None  # text before the math, or between two spans ("$3$ to $4$")
    text = latin_letters(", ".join(items).translate(_SYMBOLS))
    return text if text.isascii() else None


def _after_lead(pieces: list[tuple[bool, str]]) -> list[tuple[bool, str]] | None:
    """The pieces of the answer itself: after the sentence's last "is"/":" ("Final Answer: The largest $n$ is
    34") when what comes before it names no number and hedges nothing, after discourse words ("Thus $x < 3$"),
    else the whole sentence; None when the lead is not allowed."""
    for index in range(len(pieces) - 1, -1, -1):
        is_math, text = pieces[index]
        connectors = [] if is_math else list(_CONNECTOR.finditer(text))
        if connectors:
            cut = connectors[-1].end()
            lead = [*pieces[:index], (False, text[:cut])]
            if any(re.search(r"\d", part) for _, part in lead) or _hedged_lead(lead):
                return None  # "4, which is 3": a second candidate; "it could be 3"
            return [(False, text[cut:]), *pieces[index + 1 :]]
    if len(pieces) > 1 and not pieces[0][0] and _DISCOURSE.fullmatch(pieces[0][1].strip()):
        return pieces[1:]
    return pieces


def _hedged_lead(lead: list[tuple[bool, str]]) -> bool:
    text = " ".join(part for is_math, part in lead if not is_math)
    words = _HEDGE.findall(text)
    modal = _MODAL_BEFORE_CONNECTOR.search(text)  # "could be in the domain of $f$ is": a clause, no hedge
    return bool(modal) or any(word.lower() not in ("could", "might", "may") for word in words)


def _plain_item(item: str) -> bool:
    """Whether one item of a plain-text answer is an expression, optionally followed by a unit (``3 hours``), or
    a word answer (``yes``, ``Monday``): no word before a number or after it that is not a unit."""
    words = _WORD.findall(item)
    if not words or not re.search(r"\d", item):
        return True
    value, unit = split_unit(item.strip())
    return unit is not None and not _WORD.search(value)
