"""Reading abstract text: markup cleaning, sentences, links, and the names a paper introduces."""

from __future__ import annotations

import re
import unicodedata

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


_CREDENTIALS = re.compile(r"(?<=://)[^/@\s]+@")


def mask_credentials(text: str) -> str:
    """Text with the `user:password@` of any URL in it replaced by `***@`, safe to show or log."""
    return _CREDENTIALS.sub("***@", text)


def one_line(text: object, limit: int | None = None) -> str:
    """A message (an error, a server's reply) on one line, URL credentials masked, cut to `limit` characters; an
    exception without a message is named by its type."""
    line = mask_credentials(" ".join(str(text).split()))
    if not line and isinstance(text, BaseException):
        line = type(text).__name__
    return line if limit is None or len(line) <= limit else line[:limit] + "…"
