"""Reading abstract text: markup cleaning, sentences, links, and the names a paper introduces."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

_LATEX_SYMBOLS = {
    "times": "×", "approx": "≈", "sim": "~", "leq": "≤", "le": "≤", "geq": "≥", "ge": "≥",
    "pm": "±", "cdot": "·", "to": "→", "rightarrow": "→", "leftarrow": "←", "infty": "∞",
    "ell": "ℓ", "top": "ᵀ", "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "Delta": "Δ",
    "epsilon": "ε", "varepsilon": "ε", "theta": "θ", "Theta": "Θ", "lambda": "λ", "mu": "μ",
    "pi": "π", "sigma": "σ", "Sigma": "Σ", "tau": "τ", "phi": "φ", "omega": "ω", "Omega": "Ω",
    "nabla": "∇", "partial": "∂", "in": "∈", "neq": "≠", "ll": "≪", "gg": "≫", "log": "log",
    "%": "%", "&": "&", "_": "_", "#": "#", "$": "$",
}
# Commands whose argument is the visible text (\textbf{X} -> X).
_WRAPPERS = re.compile(
    r"\\(?:textbf|textit|textsc|texttt|textrm|textsf|emph|underline|mathrm|mathbf|mathit|mathcal|"
    r"mathbb|boldsymbol|bm|text|operatorname|url|href|mbox|hat|tilde|bar|vec)\s*\{([^{}]*)\}"
)
_SYMBOL = re.compile(r"\\([A-Za-z]+|[%&_#$])")
_MATH = re.compile(r"\$([^$]*)\$")
_MD_BOLD = re.compile(r"(\*\*|__)(.+?)\1")
_MD_ITALIC = re.compile(r"(?<![\w*])\*(?!\s)([^*\n]+?)\*(?![\w*])")
_MD_CODE = re.compile(r"`([^`]+)`")
_URL = re.compile(r"https?://[^\s)\]}>,;\"']+")


def clean_markup(text: str) -> str:
    """LaTeX and Markdown markup turned into plain readable text ("$1.7\\times$" -> "1.7×")."""
    out = text
    for _ in range(3):  # nested wrappers: \textbf{\textsc{X}}
        out = _WRAPPERS.sub(r"\1", out)
    out = _MATH.sub(lambda m: m.group(1), out)
    out = _SYMBOL.sub(lambda m: _LATEX_SYMBOLS.get(m.group(1), m.group(1)), out)
    out = re.sub(r"\^\{([^{}]*)\}", r"^\1", out)
    out = re.sub(r"_\{([^{}]*)\}", r"_\1", out)
    out = out.replace("{", "").replace("}", "")
    out = _MD_BOLD.sub(r"\2", out)
    out = _MD_ITALIC.sub(r"\1", out)
    out = _MD_CODE.sub(r"\1", out)
    out = re.sub(r"\(cid:\d+\)", "", out)  # glyphs a PDF extraction could not map
    out = re.sub(r"\s+", " ", out)
    out = re.sub(r"\s+([.,;:%])", r"\1", out)
    return out.strip()


def find_links(text: str) -> list[str]:
    """URLs in the text, without trailing punctuation."""
    return list(dict.fromkeys(u.rstrip(".}") for u in _URL.findall(text)))


_ABBREV = r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\bet al\.)(?<!\bvs\.)(?<!\bcf\.)(?<!\bFig\.)(?<!\bEq\.)"
_SENTENCE_END = re.compile(_ABBREV + r"(?<=[.!?])\s+(?=[A-Z0-9(\[\"“])")


def split_sentences(text: str) -> list[str]:
    """Sentences of a (cleaned) abstract."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


# --- names ------------------------------------------------------------------------------------------
_INTRO = re.compile(
    r"\b(?:we|this paper|this work|our work)\s+(?:(?:first|further|also|then|therefore|thus|hence|here|now|"
    r"additionally|instead|finally)\s+)?"
    r"(?:propose|introduce|present|develop|design|build|release|construct|curate|call|name|term|dub)s?\b"
    r"|\b(?:introducing|proposing|presenting|called|named|dubbed|termed)\b",
    re.IGNORECASE,
)
_ARTICLE = re.compile(r"^(?:the|a|an|our|two|three|new|novel)\s+", re.IGNORECASE)
# A "name-like" token: has a capital after its first character, a digit, or is an all-caps word
# (CorrSteer, Het-CPFLoRA, DSGym, VISTA, SSO, Quartet II).
_NAMEY = re.compile(r"^(?=.*[A-Za-z])(?:[A-Za-z0-9]*[a-z0-9][A-Z]|[A-Z]{2,}|.*\d|[A-Z][a-z]+[-][A-Z])")
_ACRONYM_DEF = re.compile(r"((?:[A-Z][\w\-–]*\s+){1,7}[A-Z][\w\-–]*)\s*\(([A-Z][\w\-–.]{1,20})\)")
_ROMAN = {"ii": "2", "iii": "3", "iv": "4", "v": "5", "vi": "6"}


def normalize_name(name: str) -> str:
    """A name in comparable form: lower case, no spaces or punctuation, roman numerals as digits."""
    words = re.findall(r"[a-z0-9]+", unicodedata.normalize("NFKD", name).lower())
    return "".join(_ROMAN.get(w, w) if i else w for i, w in enumerate(words))


def _is_namey(word: str) -> bool:
    return bool(_NAMEY.match(word)) and word.lower() not in {"llm", "llms", "ai", "rl", "ood"}


_PHRASE_ACRONYM = re.compile(r"^([A-Z][^,.;:()]{2,90}?)\s*\(([A-Z][\w\-–.+]{1,20})\)")


def _names_at(fragment: str) -> list[str]:
    """The names a fragment starts with ("CorrSteer, a method..." -> ["CorrSteer"])."""
    fragment = _ARTICLE.sub("", _ARTICLE.sub("", fragment.strip()))
    m = _PHRASE_ACRONYM.match(fragment)
    if m:  # "Query-Adaptive Trust-Region policy Optimization (QUATRO)": acronym first
        return [m.group(2).rstrip("."), m.group(1).strip()]
    m = re.match(r"([A-Z][\w\-–.+]*(?:\s+(?:[A-Z][\w\-–+]*|\d+(?:\.\d+)?|[IVX]+))*)", fragment)
    if not m:
        return []
    words = m.group(1).rstrip(".").split()
    # A run of capitalised words counts when one of them looks like a name (Quartet II) or it is a
    # multi-word proper name (Latent Velocity Entropy); a lone ordinary word ("Experiments") is not.
    if any(_is_namey(w) for w in words) or 2 <= len(words) <= 6:
        return [" ".join(words[:6])]
    return []


def introduced_names(text: str) -> list[str]:
    """Names the abstract introduces for its method, model, dataset or benchmark (best first)."""
    clean = clean_markup(text)
    names: list[str] = []
    for m in _INTRO.finditer(clean):
        names.extend(_names_at(clean[m.end():m.end() + 140]))
    for long, short in _ACRONYM_DEF.findall(clean):
        # Only definitions of the paper's own names: "Latent Exploration Decoding (LED)".
        if any(long.strip() == n or short == n for n in names):
            names.extend([short, long.strip()])
    out: list[str] = []
    seen: set[str] = set()
    for name in names:
        part = name.strip(" ,.")
        key = normalize_name(part)
        if len(key) >= 2 and key not in seen:
            seen.add(key)
            out.append(part)
    return out[:6]


# Where a descriptor or a contribution's object stops being a noun phrase: a relative or participle clause, a
# finite verb ("the framework leverages the ..."), or punctuation.
_PHRASE_END = re.compile(
    r",\s+(?:\w+ing|which|that|where|and|while|with|but)\b|\s+(?:that|which|who|whose|where|while|inspired|"
    r"integrated|designed|built|based|leveraging|using|enabling|comprising|encompassing|trained|equipped|tailored|"
    r"allowing|achieving|yielding|showing)\b|\s+and\s+(?:characteri[sz]e|show|find|demonstrate|evaluate|propose|"
    r"introduce|analy[sz]e)\b|\s+[a-z]+s\s+(?=(?:the|a|an|its|their|our|both|each|all|this|these|to)\b)|[;.()]|\s[–—-]\s"
)
_CONTRIBUTION_OBJECT = re.compile(
    r"\b(?:we|this (?:paper|work))\s+(?:[a-z]+ly\s+|[a-z]+\s+)?(?:propose|introduce|present|study|analy[sz]e|"
    r"investigate|examine|explore|develop|design|characteri[sz]e)s?\s+(.+)",
    re.IGNORECASE,
)
_LEADING = re.compile(r"^(?:(?:a|an|the|novel|new|various|several|our)\s+)+", re.IGNORECASE)
_DANGLING = {"a", "an", "the", "of", "for", "in", "on", "to", "with", "by", "and", "or", "from", "via", "at", "as",
             "into", "across", "under", "its", "their", "is", "are"}
_PREPOSITIONS = {"for", "of", "in", "on", "with", "from", "across", "under", "at", "via", "by", "to", "into"}
TITLE_WORDS = 12  # longest descriptor kept, in words


def noun_phrase(text: str, allow_colon: bool = False) -> str:
    """The noun phrase a text starts with: up to the first clause boundary, at most TITLE_WORDS words, cut at a
    preposition when longer, never ending in a function word; leading articles dropped."""
    text = _LEADING.sub("", text.strip())
    words = text.split()
    match = _PHRASE_END.search(text)
    cut = text[: match.start()] if match else text
    if not allow_colon:
        cut = cut.split(":")[0]
    phrase = cut.split()
    if len(phrase) < 2 and match and re.match(r",?\s+\w+ing\b", match.group(0)):
        phrase = words  # "framework enabling agents to ...": a reduced clause still names what it is
    if len(phrase) > TITLE_WORDS:  # cut where a prepositional phrase starts, not in its middle
        phrase = phrase[:TITLE_WORDS]
        stops = [i for i, w in enumerate(phrase) if w.lower() in _PREPOSITIONS and i >= 3]
        if stops:
            phrase = phrase[: stops[-1]]
    while phrase and phrase[-1].lower().strip(",") in _DANGLING:
        phrase.pop()
    result = " ".join(phrase).strip(" ,:")
    return result[:1].upper() + result[1:]


def derive_title(text: str, names: list[str] | None = None) -> str:
    """A display title naming the contribution as a noun phrase: the introduced name with what it is
    ("CorrSteer", "Op-CAD: First large-scale, multi-modal dataset for operation-oriented CAD generation"), else the
    object of the contribution sentence ("How syntactic and semantic information is encoded in ..."); never a
    cut-off sentence."""
    clean = clean_markup(text)
    names = introduced_names(text) if names is None else names
    if len(names) >= 2 and names[1][0].upper() == names[0][0].upper() \
            and len(names[1]) > len(names[0]) + 3 and " " in names[1]:
        return f"{names[0]}: {names[1]}"
    if names:
        name = names[0]
        pos = clean.find(name)
        after = clean[pos + len(name):] if pos >= 0 else ""
        after = re.sub(r"^\s*\([^)]*\)", "", after)
        m = re.match(r"\s*[,:—–-]\s*((?:a|an|the)\s.+)", after)
        descriptor = noun_phrase(m.group(1)) if m else ""
        return f"{name}: {descriptor}" if len(descriptor.split()) >= 2 else name
    for sentence in split_sentences(clean):
        m = _CONTRIBUTION_OBJECT.search(sentence)
        if m:
            phrase = noun_phrase(m.group(1), allow_colon=True)
            if len(phrase.split()) >= 2:
                return phrase
    first = split_sentences(clean)[0] if clean else ""
    return noun_phrase(re.split(r"[,;:]", first)[0]) or clean[:80]


# --- headings ---------------------------------------------------------------------------------------
_NOUN_ENDINGS = re.compile(
    r"(?:tion|sion|ment|ness|ity|ism|ure|ance|ence|ics|ogy|sis|ing|er|or|ers|ors|ant|ist|age|ship|hood|data|"
    r"model|graph|agent|network|system|benchmark|dataset|attention|learning|decoding|search|steering|policy|"
    r"memory|cache|kernel|code|text|image|speech|audio|video|reward)s?$",
    re.IGNORECASE,
)


def is_nounish(word: str) -> bool:
    """Whether a single word can head a theme or topic name: a name or acronym (CorrSteer, LoRA, KV), or a noun
    by its ending."""
    return bool(re.search(r"[A-Z].*[A-Z]|\d", word)) or bool(_NOUN_ENDINGS.search(word.lower()))


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


_CREDENTIALS = re.compile(r"(?<=://)[^/@\s]+@")


def mask_credentials(text: str) -> str:
    """Text with the `user:password@` of any URL in it replaced by `***@`, safe to show or log."""
    return _CREDENTIALS.sub("***@", text)


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
    for part in _CONCEPT_JOINS.split(topic):
        words = _WORD_RE.findall(part.lower())
        distinctive = [w for w in words if w not in _GENERAL]
        # A part of general words only ("large language models") is still a concept: the one a paper must combine.
        # In American spelling, as most abstracts are written ("defences" -> "defenses").
        stems = frozenset(word_stems(" ".join(spellings(w)[-1] for w in distinctive or words))) if words else frozenset()
        phrase = re.sub(r"^(?:the|a|an|what does|which papers use)\s+", "", part.strip(), flags=re.IGNORECASE)
        phrase = _LEAD_VERB.sub("", phrase)  # "detect fake news" is named "fake news" in a sentence about it
        if stems and phrase and len(phrase.split()) <= CONCEPT_WORDS and not set(words) <= _EMPTY_CONCEPT:
            concepts.append((phrase, stems, not distinctive))
    return tuple(concepts)


# --- the words a short question is about ----------------------------------------------------------------
# Words a question is phrased with rather than what it is about ("is there any paper giving the state of the art").
_PHRASING = set(
    "any several each other should would could state art give gives given best main help hold own like so were "
    "was been have has had just really way ways kind kinds good well there also choose choosing chosen pick "
    "picking decide find want need exist exists already".split()
)
# British spellings, so that "behaviour" or "optimise" in a question meets "behavior" and "optimize" in abstracts.
_BRITISH_OUR = re.compile(r"^(behavi|col|fav|lab|neighb|hon|flav|hum|rum|vap|harb|endeav|sav)our")
_BRITISH_ISE = re.compile(r"(\w{3,}[^aeiou\W])is(e|es|ed|ing|ation|ations|er|ers)$")
_BRITISH_YSE = re.compile(r"(anal|paral|catal)ys(e|es|ed|ing)$")
_BRITISH_ENCE = re.compile(r"^(defen|offen|licen|preten)ce")
_BRITISH_TRE = re.compile(r"^(cent|fib|met|lit)re(s|d)?$")


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
    words, words every abstract of the field has ("model", "method") and question phrasing ("state of the art")
    left out."""
    words: list[tuple[str, frozenset[str]]] = []
    seen: set[str] = set()
    ignored = _ignored_stems()
    for word in _WORD_RE.findall(topic):
        lower = word.lower()
        if lower in seen:
            continue
        seen.add(lower)
        stems = frozenset(s for form in spellings(lower) for s in word_stems(form))
        if stems and not stems & ignored:
            words.append((word, stems))
    return words


# --- acronyms a question qualifies its topic with ---------------------------------------------------------
# "quantizing LLM weights", "RL for robotic manipulation", "KV cache eviction": an all-capitals word of 2-6
# letters (plural "s" allowed) names the kind of system or method the topic is about.
_ACRONYM = re.compile(r"\b([A-Z]{2,6})s?\b")


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
