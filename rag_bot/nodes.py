"""How rag-bot's types travel through llama-index: the question as a `PaperQuery` bundle, papers as nodes.

The retriever returns one `NodeWithScore` per paper; the grounding stage returns its typed decision (a `Grounding`)
beside the nodes it ranked, the candidates it weighed most probable first, and the engine hands both to the writer. Keeping the
conversion here means no stage needs to know another's internals.
"""

from __future__ import annotations

from dataclasses import dataclass

from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from rag_bot.types import Filters, Mode, ScoredPaper

# Node metadata keys (the paper itself rides along under PAPER; none of it is embedded or shown to a model).
PAPER = "paper"
_SCORES = ("similarity", "named", "coverage")


@dataclass
class PaperQuery(QueryBundle):
    """A question as the query engine sees it: `query_str` is what retrieval searches with; `question` is what
    the answer addresses (the user's question, or its standalone rewrite after an earlier turn)."""

    question: str = ""
    mode: Mode = "ask"
    max_papers: int | None = None
    stream: bool = False
    carry_over: tuple[str, ...] = ()  # papers cited in the previous turn, kept as candidates of a follow-up
    carry_over_question: str = ""  # the previous question, which their similarity is measured against
    filters: Filters | None = None  # only papers passing these are retrieved (never widened when none pass)
    filter_note: str = ""  # what the answer says about the filter it used
    searched_for: str = ""  # the question as searched when its spelling was corrected (shown to the user)


def paper_node(scored: ScoredPaper) -> NodeWithScore:
    """A ranked paper as a llama-index node (score = the fused ranking score)."""
    keys = [PAPER, *_SCORES]
    node = TextNode(
        id_=scored.paper.doc_id,
        text=scored.paper.text,
        metadata={PAPER: scored.paper, **{k: getattr(scored, k) for k in _SCORES}},
        excluded_embed_metadata_keys=keys,
        excluded_llm_metadata_keys=keys,
    )
    return NodeWithScore(node=node, score=scored.score)


def scored_paper(node: NodeWithScore) -> ScoredPaper:
    """The `ScoredPaper` a node was made from."""
    meta = node.node.metadata
    return ScoredPaper(paper=meta[PAPER], score=node.score or 0.0, **{k: meta[k] for k in _SCORES})
