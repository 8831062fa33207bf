"""Quotes that read on their own: an abstract's sentence without the words that tie it to the sentence before.

An abstract's sentences lean on each other: "However, recent studies show …", "To this end, we propose …",
"Motivated by this entropy asymmetry, we introduce …". Quoted alone in an answer, the lead-in dangles. `clean_quote`
drops such a lead-in, keeping the rest exactly as the abstract has it (a suffix of the sentence, so the citation's
quote is still found verbatim in the abstract and the card highlights it); `reads_alone` says whether a quote, so
cleaned, still starts with a reference to something it does not name ("This yields …", "These results …").

The words are English's closed classes (discourse connectives and demonstratives), not any collection's words.
"""

from __future__ import annotations

import re

# Sentence-initial discourse connectives: contrast, addition, consequence, sequence, purpose, emphasis.
_CONNECTIVE = (
    r"however|moreover|furthermore|additionally|also|besides|further|in addition|specifically|notably|importantly|"
    r"crucially|remarkably|interestingly|surprisingly|consequently|therefore|thus|hence|accordingly|as a result|"
    r"as such|meanwhile|nevertheless|nonetheless|still|yet|instead|rather|indeed|in fact|in contrast|by contrast|"
    r"on the contrary|on the other hand|conversely|similarly|likewise|in particular|in practice|in summary|"
    r"in short|in sum|overall|altogether|together|ultimately|finally|lastly|first|firstly|second|secondly|third|"
    r"thirdly|next|then|subsequently|concretely|empirically|experimentally|theoretically|practically|"
    r"to this end|to that end|for this purpose|for example|for instance|unfortunately|fortunately|"
    r"beyond this|beyond that|building on this|building on these|on top of this|in this regard|in doing so|"
    r"by doing so|with this|to do so|as a consequence|in turn|here|now|recently|currently|to date|so far"
)
# Most need their comma to be read as connectives ("Further, …" but "Further experiments …"); these never need it.
_BARE = (r"however|moreover|furthermore|additionally|consequently|therefore|thus|hence|nevertheless|nonetheless|"
         r"finally|instead|meanwhile")
# Any sentence adverb with its comma ("Empirically, …", "Surprisingly, …") is a lead-in too.
_LEAD_CONNECTIVE = re.compile(rf"^(?:(?:{_CONNECTIVE}),|[a-z]+ly,|(?:{_BARE})\b,?)\s+", re.IGNORECASE)
# A demonstrative that points back ("this", "these", …), unless it points at the paper itself ("this paper").
_SELF = r"(?:paper|work|study|article|letter|note|manuscript|submission|report)"
_BACK_REFERENCE = re.compile(rf"\b(?:this|these|those|that|such|the above|the aforementioned)\b(?!\s+{_SELF}\b)",
                             re.IGNORECASE)
# "It" opening a sentence points back unless it is the expletive of "It is hard to …" / "It has been shown that …".
# A reporting frame before it ("We argue that such a point estimate …", "We show that this …") still points back.
_POINTING_START = re.compile(rf"^(?:we\s+(?:\w+\s+){{0,2}}?that\s+)?"
                             rf"(?:(?:this|these|those|such|that)\b(?!\s+{_SELF}\b)|(?:they|its|their)\b|"
                             r"it\b(?!\s+(?:is|was|has been|remains|seems|turns out)\b[^.]*\b(?:to|that)\b))",
                             re.IGNORECASE)
# A lead-in clause opens with a preposition, "to", or a participle ("Motivated by …", "Building on …"), never with
# the sentence's subject ("Such methods, however, fail …" keeps its subject).
_CLAUSE_OPENING = re.compile(
    r"^(?:to|in|on|for|by|with|from|under|given|unlike|despite|beyond|after|following|against|through|via|as|"
    r"while|whereas|because|since|although|though|when|once|if|"
    r"based|[a-z]+(?:ed|en|ing))\b", re.IGNORECASE)
LEAD_IN_WORDS = 14  # a lead-in clause is at most this long ("Motivated by this entropy asymmetry between …,")
REST_WORDS = 5  # what is left after a dropped lead-in must be a sentence of its own, at least this long


def _lead_in(sentence: str) -> int:
    """Where the sentence starts once its dangling lead-in is dropped (0: nothing to drop)."""
    start = 0
    for _ in range(3):  # "However, to this end, we …"
        rest = sentence[start:]
        m = _LEAD_CONNECTIVE.match(rest)
        if m and len(rest[m.end():].split()) >= REST_WORDS:
            start += m.end()
            continue
        # A leading clause ending in a comma that refers back ("Motivated by this asymmetry, we …").
        comma = rest.find(", ")
        clause = rest[:comma] if comma > 0 else ""
        if clause and len(clause.split()) <= LEAD_IN_WORDS and _CLAUSE_OPENING.match(clause) \
                and _BACK_REFERENCE.search(clause) \
                and "(" not in clause and len(rest[comma + 2:].split()) >= REST_WORDS:
            start += comma + 2
            continue
        break
    return start


def clean_quote(sentence: str) -> str:
    """The sentence without a leading connective or back-referring lead-in: a suffix of it, exactly."""
    return sentence[_lead_in(sentence):]


def reads_alone(quote: str) -> bool:
    """False when the quote (cleaned) still opens by pointing at something it does not name ("This yields …")."""
    return not _POINTING_START.match(quote.lstrip("“\"'("))


def quoted(sentence: str, before: str = "") -> tuple[str, str]:
    """(the quote, as the answer shows it) of a sentence: cleaned, and led by `before` (the sentence before it in
    the abstract, cleaned) when it points back at what it does not name and `before` reads alone: two adjacent
    sentences are still one exact piece of the abstract. Shown with its first letter capitalised when a lead-in
    was dropped ("we propose …" reads "We propose …"; the quote keeps the abstract's own letters)."""
    quote = clean_quote(sentence)
    if before and not reads_alone(quote) and reads_alone(clean_quote(before)):
        quote = f"{clean_quote(before)} {sentence}"
    opening = quote.split(" ", 1)[0]
    dropped = not (sentence.startswith(opening) or before.startswith(opening))
    shown = quote[:1].upper() + quote[1:] if dropped and quote[:1].islower() else quote
    return quote, shown
