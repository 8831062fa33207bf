"""Surfaces: what users touch, each a thin layer over `Engine`.

`cli` (the `rag-bot` command, which imports the others), `ui` (the Gradio chat), `api` (the OpenAI-compatible
`/v1`), `mcp_server` (MCP tools, resources and prompts), `access` (the door in front of `/v1` and `/mcp`),
`collection_map` (the topic map the chat draws).
"""
