"""Quality: retrieval, grounding and the written answers measured on labelled and generated questions."""
