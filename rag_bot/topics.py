"""What a question is about, for every stage: its topic without the instruction around it (`topic_query`), its content words and their stems, the concepts it joins ("X for Y", "X applied to Y"), the acronyms it names and whether a text holds them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

# --- the words a short question is about ----------------------------------------------------------------
# Words a question is phrased with rather than what it is about ("is there any paper giving the state of the art").
_PHRASING = set(
    "any several each other should would could state art give gives given best main help hold own like so were "
    "was been have has had just really way ways kind kinds good well there also choose choosing chosen pick "
    "picking decide find want need exist exists already".split()
)
# Indefinite pronouns ("Has anyone studied ...", "Is there something on ..."): the one asking, or what is asked
# for, never what a question is about. A closed class of English grammar, named here because Pattern's lexicon
# (TextBlob's tagger) tags them NN, as the Penn Treebank does; `_tags` tags them as the pronouns they are, and
# `asking_words` leaves them out of every topic and concept.
_INDEFINITE = set("anyone anybody anything someone somebody something everyone everybody everything".split())
# British spellings, so that "behaviour" or "optimise" in a question meets "behavior" and "optimize" in abstracts.
_BRITISH_OUR = re.compile(r"^(behavi|col|fav|lab|neighb|hon|flav|hum|rum|vap|harb|endeav|sav)our")
_BRITISH_ISE = re.compile(r"(\w{3,}[^aeiou\W])is(e|es|ed|ing|ation|ations|er|ers)$")
_BRITISH_YSE = re.compile(r"(anal|paral|catal)ys(e|es|ed|ing)$")
_BRITISH_ENCE = re.compile(r"^(defen|offen|licen|preten)ce")
_BRITISH_TRE = re.compile(r"^(cent|fib|met|lit)re(s|d)?$")


# --- acronyms a question qualifies its topic with ---------------------------------------------------------
# "quantizing LLM weights", "RL for robotic manipulation", "KV cache eviction": an all-capitals word of 2-6
# letters (plural "s" allowed) names the kind of system or method the topic is about.
_ACRONYM = re.compile(r"\b([A-Z]{2,6})s?\b")



# --- questions ---------------------------------------------------------------------------------------
# Words that say what kind of answer is wanted, not what it is about; they only blur retrieval.
_INSTRUCTION = re.compile(
    r"\b(?:(?:please|can you|could you)\s+)?(?:summari[sz]e|give (?:me )?(?:an? )?(?:overview|summary)"
    r"(?: of)?|overview of|compare|contrast|tell me (?:about|what)|explain|what does (?:the|this) "
    r"collection (?:say|hold|have) (?:about|on)|what (?:has|does) (?:the|this) collection (?:got|have) "
    r"(?:on|about)|is there (?:a |any )?(?:paper|work|research) (?:on|about|that)|"
    r"(?:which|what) papers? (?:study|studies|address|addresses|propose|use|tackle)|which papers?|"
    r"(?:the )?(?:work|research|papers|literature|studies) (?:on|about|that)|in (?:the|this) collection|"
    r"how (?:do|does|did) (?:the )?|(?:papers?|works?|approaches|methods) (?:differ|compare)\b|differ(?:s|ent)?\b|"
    r"what (?:do|does) (?:the )?papers? say (?:about|on)|what are the (?:main )?(?:approaches|methods|papers|"
    r"directions) (?:to|for|on))\b",
    re.IGNORECASE,
)


def topic_query(question: str) -> str:
    """The question without the words that ask for a mode ("summarize the work on X" -> "X")."""
    topic = " ".join(_INSTRUCTION.sub(" ", question).split()).strip(" ,.;:?")
    topic = re.sub(r"\s+(?:papers?|works?|approaches)$", "", topic, flags=re.IGNORECASE)
    return topic if len(topic) >= 3 else question


# --- the concepts of a question ------------------------------------------------------------------------
# Where a question joins two concepts ("sparse autoencoders for vision transformers"); "and"/"of" are left alone:
# they join parts of one concept more often than two ("inference and serving", "cost of the KV cache").
# "apply X to Y", "use X to steer Y", "X used to design Y": the same join as "X for Y".
_APPLIED_TO = re.compile(r"\b(?:apply|applies|applying|applied|use|uses|using|used)\s+(.+?)\s+to\s+",
                         re.IGNORECASE)


# "has X been applied to Y", "X being used for Y": also X for Y.
_BEEN_APPLIED = re.compile(r"^(?:(?:has|have|is|are|was|were)\s+)?(.+?)\s+(?:been|being|be)\s+(?:applied|used)\s+"
                           r"(?:to|for|in|on)\s+(.+)$", re.IGNORECASE)


_BASED = re.compile(r"\b([\w\-]+?)-based\s+(.+)$", re.IGNORECASE)  # "GAN-based music generation": music generation with GAN


_CONCEPT_JOINS = re.compile(r"\s+(?:for|in|with|using|via|applied to|on|(?:approaches|methods|techniques) to)\s+",
                            re.IGNORECASE)


# What follows the topic in a chatty question: an aside in brackets, an example ("e.g. ..."), a dash or colon and
# what comes after it, a closing "anything?" or "in any of these papers".
_ASIDE = re.compile(r"\([^)]*\)|\s+(?:e\.g\.|i\.e\.|such as|like|where|when|so that|so|whether)\b.*$|\s[-–—:/]\s.*$|"
                    r",\s.*$|\?.*$", re.IGNORECASE)


_OPENING = re.compile(r"^(?:(?:any(?:thing)?|has|have|does|do|is|are|was|were|handles?|studies|study)\s+)+"
                      r"(?:(?:work|papers?|research)\s+)?(?:(?:on|about)\s+)?", re.IGNORECASE)


_TRAILER = re.compile(r"(?:\s*[-–—,]?\s*\b(?:anything|any papers?|any work)\s*)$|\s+in (?:any of )?(?:these|the) "
                      r"papers$", re.IGNORECASE)


# Words too general to tell a concept apart: every abstract of the field has them.
_GENERAL = set(
    "model models large language llm llms learning method methods approach approaches based using use new "
    "paper papers work study studies task tasks data neural network networks deep system systems framework "
    "frameworks performance results efficient effective improve improving make making cheaper better what does "
    "do which how who why when where gain gains say says".split()
)


_WORD_RE = re.compile(r"(?u)\b\w\w+\b")


# A verb a concept opens with in a question ("detect fake news", "using graphs"), left out of its name.
_LEAD_VERB = re.compile(r"^(?:detect|detecting|use|using|apply|applying|predict|predicting|classify|classifying|"
                        r"generate|generating|build|building|improve|improving|evaluate|evaluating|study|studying|"
                        r"handle|handling|identify|identifying|find|finding|make|making)\s+(?=\S+)", re.IGNORECASE)


_EMPTY_CONCEPT = {"any", "anything", "there", "is", "are", "paper", "papers", "these", "those", "this", "work", "of",
                  "the"}


CONCEPT_TOPIC_WORDS = 14  # longer topics (after their asides) are not split into concepts


CONCEPT_WORDS = 5  # a concept is a short noun phrase


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    import Stemmer

    return Stemmer.Stemmer("english")


def word_stems(text: str) -> list[str]:
    """The stemmed words of a text, as BM25 sees them (English Snowball stems, stop words removed)."""
    import bm25s

    return list(bm25s.tokenize([text], stopwords="en", stemmer=_stemmer(), show_progress=False,
                               return_ids=False)[0])


@lru_cache(maxsize=256)  # grounding asks for a question's concepts at each of its steps
def question_concepts(topic: str) -> tuple[tuple[str, frozenset[str], bool], ...]:
    """The concepts a question's topic joins, each with its distinctive stems and whether it is made of general
    words only: "speculative decoding for speech recognition" -> (("speculative decoding", {specul, decod}, False),
    ("speech recognition", {speech, recognit}, False))."""
    topic = _OPENING.sub("", _TRAILER.sub("", _ASIDE.sub("", topic.strip())).strip(" ?.!,;"))
    topic = _BASED.sub(r"\2 with \1", _BEEN_APPLIED.sub(r"\1 for \2", _APPLIED_TO.sub(r"\1 for ", topic)))
    if len(topic.split()) > CONCEPT_TOPIC_WORDS:
        return ()  # a long question describes one need in many words; it is not a join of short concepts
    concepts = []
    asking = asking_words(topic)
    for part in _CONCEPT_JOINS.split(topic):
        words = _WORD_RE.findall(part.lower())
        distinctive = [w for w in words if w not in _GENERAL and w not in asking]
        # A part of general words only ("large language models") is still a concept: the one a paper must combine.
        # In American spelling, as most abstracts are written ("defences" -> "defenses").
        stems = frozenset(word_stems(" ".join(spellings(w)[-1] for w in distinctive or words))) if words else frozenset()
        phrase = re.sub(r"^(?:the|a|an|what does|which papers use)\s+", "", part.strip(), flags=re.IGNORECASE)
        phrase = _LEAD_VERB.sub("", phrase)  # "detect fake news" is named "fake news" in a sentence about it
        if stems and phrase and len(phrase.split()) <= CONCEPT_WORDS and not set(words) - asking <= _EMPTY_CONCEPT:
            concepts.append((phrase, stems, not distinctive))
    return tuple(concepts)


def spellings(word: str) -> list[str]:
    """A word and its American spelling when it has a British one ("behaviour" -> ["behaviour", "behavior"])."""
    american = _BRITISH_YSE.sub(r"\1yz\2", _BRITISH_ISE.sub(r"\1iz\2", _BRITISH_OUR.sub(r"\1or", word)))
    american = _BRITISH_TRE.sub(r"\1er\2", _BRITISH_ENCE.sub(r"\1se", american))
    return [word] if american == word else [word, american]


@lru_cache(maxsize=1)
def _ignored_stems() -> frozenset[str]:
    return frozenset(word_stems(" ".join(_GENERAL | _PHRASING)))


def topic_words(topic: str) -> list[tuple[str, frozenset[str]]]:
    """The words a topic is about, as written, each with the stems that count as holding it (its spellings): stop
    words, the words it asks with (`asking_words`), words every abstract of the field has ("model", "method")
    and question phrasing ("state of the art") left out."""
    words: list[tuple[str, frozenset[str]]] = []
    seen: set[str] = set()
    ignored = _ignored_stems()
    asking = asking_words(topic)
    for word in _WORD_RE.findall(topic):
        lower = word.lower()
        if lower in seen or lower in asking:
            continue
        seen.add(lower)
        stems = frozenset(s for form in spellings(lower) for s in word_stems(form))
        if stems and not stems & ignored:
            words.append((word, stems))
    return words


def topic_acronyms(topic: str) -> list[str]:
    """The acronyms a topic is qualified by ("quantizing or compressing LLM weights" -> ["LLM"])."""
    return list(dict.fromkeys(_ACRONYM.findall(topic)))


@lru_cache(maxsize=256)
def _acronym_pattern(acronym: str) -> re.Pattern[str]:
    # The acronym itself (LLM, LLMs), or words whose initials spell it ("large language model", "key-value").
    spelled = r"[\s\-]+".join(rf"{letter}[\w]*" for letter in acronym.lower())
    return re.compile(rf"\b(?:{re.escape(acronym)}s?|{spelled})\b", re.IGNORECASE)


def holds_acronyms(text: str, acronyms: Sequence[str]) -> bool:
    """Whether a text mentions what each of the acronyms stands for (see `holds_acronym`)."""
    return all(holds_acronym(text, acronym) for acronym in acronyms)


def holds_acronym(text: str, acronym: str) -> bool:
    """Whether a text mentions what an acronym stands for: the acronym, or a phrase whose initials spell it."""
    for match in _acronym_pattern(acronym).finditer(text):
        found = match.group(0)
        # A spelled-out phrase counts in any case; the acronym itself only in capitals (not "llm" in a URL).
        if re.search(r"[\s\-]", found) or found.removesuffix("s") == acronym:
            return True
    return False


# --- the topic as an answer's sentence quotes it ------------------------------------------------------------
# A refusal quotes what the question is about, and a missing-part sentence names its concepts, in the question's
# own words less its request ("Can you recommend a paper about", "What ... work exists on"). The parts of speech
# come from TextBlob's English tagger (Pattern's lexicon and rules, shipped in its wheel: nothing is downloaded);
# which words are request rather than topic is what the decision already holds: stop words, question phrasing
# (`_PHRASING`) and the words that make no concept (`_EMPTY_CONCEPT`).
# Tags that open no topic and end none: pronouns, wh-words, modals, determiners, prepositions, conjunctions,
# adverbs and finite verbs ("Can you recommend a paper about ..." -> "baking bread").
_EDGE_TAGS = ("PRP", "WP", "WDT", "WRB", "MD", "EX", "DT", "PDT", "IN", "TO", "CC", "RB", "VB", "VBZ", "VBP",
              "VBD", "POS", "FW", "UH", "SYM", "LS", ":", ".", ",", "(", ")", '"', "''")
# Tags that split a request from its topic wherever they stand (the one asking, what is asked of it).
_REQUEST_TAGS = ("PRP", "WP", "WDT", "WRB", "MD", "EX")
_PARTICIPLES = ("VBG", "VBN", "VBD")
_QUOTED_WORD = re.compile(r"[\w(][\w'’\-./+()]*[\w)+]|\w")


@lru_cache(maxsize=1)
def _request_words() -> frozenset[str]:
    # Stop words among them ("the", "of") join a topic's words as often as a request's: they split nothing.
    return frozenset((_PHRASING | _EMPTY_CONCEPT) - _stop_words())


@lru_cache(maxsize=1)
def _request_stems() -> frozenset[str]:
    return frozenset(word_stems(" ".join(_request_words())))


@lru_cache(maxsize=512)
def _tags(words: tuple[str, ...]) -> tuple[str, ...]:
    from textblob.en import tag  # its lexicon loads in about 0.3 s, at the first question

    tagged = tag(" ".join(words), tokenize=False)
    if len(tagged) != len(words):
        return ("NN",) * len(words)
    return tuple("PRP" if w.lower() in _INDEFINITE else t for w, t in zip(words, (t for _, t in tagged)))


# The tags of the words a question asks with: pronouns (and the indefinite ones, `_tags`), wh-words, modals and
# existential "there" ("Can you ...", "Is anyone ...", "What can you tell me ..."), never what a paper must hold.
# Determiners, prepositions and conjunctions count on as before: leaving them out too raised every question's word
# coverage and answered one more absent topic of the 22,166-paper collection's locked part (docs/eval.md).
_ASKING_TAGS = (*_REQUEST_TAGS, "PRP$", "WP$")


@lru_cache(maxsize=512)
def asking_words(text: str) -> frozenset[str]:
    """The words a question asks with, as its context tags them, in lower case ("Can you recommend a paper about
    X" -> can, you)."""
    words = tuple(m.group(0) for m in _QUOTED_WORD.finditer(text))
    tags = _tags(words) if words else ()
    return frozenset(w.lower() for w, t in zip(words, tags) if t in _ASKING_TAGS and _WORD_RE.fullmatch(w))


def topic_phrase(text: str) -> str:
    """The words of a question (or of one of its concepts) that say what it is about, as a sentence quotes them:
    "Can you recommend a paper about baking bread?" -> "baking bread", "What machine learning work exists on
    forecasting earthquakes?" -> "forecasting earthquakes"; "" when none is left."""
    text = topic_query(text).strip()
    for cut in (_ASIDE, _TRAILER, _OPENING):  # as `question_concepts` reads the topic, unless that leaves none
        shorter = cut.sub("", text).strip(" ?.!,;")
        text = shorter if topic_words(shorter) else text
    matches = list(_QUOTED_WORD.finditer(text))
    if not matches:
        return ""
    words = [m.group(0) for m in matches]
    tags = _tags(tuple(words))
    stop, request = _stop_words(), _request_stems()

    def asks(i: int) -> bool:  # a word of the request, not of the topic
        lower = words[i].lower()
        return tags[i] in _REQUEST_TAGS or lower in _request_words() or bool(set(word_stems(lower)) & request)

    def edge(i: int) -> bool:  # a word a quoted topic neither opens nor ends with
        return asks(i) or tags[i] in _EDGE_TAGS or words[i].lower() in stop

    # The request words split the question into runs; the topic is the run holding most of the words the decision
    # counts (`topic_words`), the later one on a tie (a question states its request first).
    runs: list[list[int]] = [[]]
    for i in range(len(words)):
        if asks(i):
            runs.append([])
        else:
            runs[-1].append(i)
    counted = {w.lower() for w, _ in topic_words(text)}
    run = max(reversed(runs), key=lambda r: (sum(words[i].lower() in counted for i in r), len(r) > 0))
    while run and edge(run[0]) or len(run) > 2 and tags[run[0]] in _PARTICIPLES and tags[run[1]] == "IN":
        run = run[1:]  # and a request's verb with its preposition: "looking for", "known about", "published on"
    # A past participle right after the one asking is the request's own verb: "Has anyone studied X", "Has anyone
    # used X" (a participle opening a topic without a request before it stays: "learned optimizers").
    if len(run) > 1 and run[0] > 0 and tags[run[0] - 1] == "PRP" and tags[run[0]] in ("VBN", "VBD"):
        run = run[1:]
    while run and edge(run[-1]):
        run = run[:-1]
    if not run:
        return ""
    phrase = text[matches[run[0]].start():matches[run[-1]].end()]
    # A general verb opening it ("use graph neural networks ...") is the request's, as in a concept's name.
    lead = _LEAD_VERB.match(phrase)
    return phrase[lead.end():] if lead and set(word_stems(lead.group(0))) <= _ignored_stems() else phrase


def is_request(concept: str) -> bool:
    """Whether a concept the question was split into is only its request ("What has been published", "what's
    here"): no noun, adjective, number or gerund is left of it once the request's words are taken off."""
    words = [m.group(0) for m in _QUOTED_WORD.finditer(topic_phrase(concept))]
    return not any(t.startswith(("NN", "JJ", "CD", "FW", "VBG")) for t in _tags(tuple(words))) if words else True


@lru_cache(maxsize=1)
def _stop_words() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)
