"""The store: papers into Chroma and back.

Takes `Paper`s (from reading) and returns a `PaperIndex` (`index`): chunks, paper vectors and metadata in Chroma
(a folder or a `chroma run` server), written incrementally by fingerprint and read back as `Paper`s; the embedders
(`embedding`: the shipped MiniLM, a model folder, an OpenAI-compatible server); sentence vectors cached for
answers (`sentences`); portable export and import, re-embedding, repair; the saved conversations.
"""
