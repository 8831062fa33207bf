"""The Conversations panel: the user's saved conversations (reopen, delete), and the current one across reloads.

The session's conversation id lives in a State (`Shared.conversation`, set by each saved answer) and is copied
to the browser's localStorage (`gr.BrowserState`), so a reload (`app.load`) reopens it. Only its owner (the
logged-in user, "" without logins) can list, open or delete a conversation: an id from someone else's
browser opens nothing.
"""

from __future__ import annotations

import logging

import gradio as gr
from gradio.components import Component
from gradio.events import Dependency

from rag_bot.surfaces.ui.base import Library, Shared, owner_of
from rag_bot.surfaces.ui.chat import ChatPanel
from rag_bot.surfaces.ui.render import conversation_label, markdown_text

log = logging.getLogger(__name__)

# localStorage key of the current conversation id. The value is not a secret (only its owner can open it), so a
# fixed encryption key is fine, and lets the current conversation survive a restart of the server too.
STORAGE_KEY = "rag-bot-conversation"
STORAGE_SECRET = "rag-bot-conversation-id"
EMPTY = "No saved conversations yet: every answer is saved as it arrives."


class HistoryPanel:
    """A folded list under the chat; it follows the chat's answers (`follow`) and "New chat"."""

    def __init__(self, library: Library, chat: ChatPanel, shared: Shared) -> None:
        self.library = library
        self.store = library.conversations
        self.chat = chat
        self.shared = shared

    def render(self) -> None:
        self.browser = gr.BrowserState(None, storage_key=STORAGE_KEY, secret=STORAGE_SECRET)
        with gr.Accordion("Conversations", open=False, elem_id="conversations"):
            self.note = gr.Markdown(self.notice(0), elem_id="conversations-note")
            self.list = gr.Radio([], value=None, show_label=False, elem_id="conversation-list")
            self.delete_btn = gr.Button("Delete selected", size="sm", variant="stop", elem_id="delete-conversation")

    def notice(self, count: int) -> str:
        if not self.store.ok:
            return f"Conversations are not being saved: {markdown_text(self.store.error or 'unknown error')}."
        return EMPTY if count == 0 else f"{count} saved conversation{'s' if count != 1 else ''} (newest first)."

    def listing(self, owner: str, current: str | None) -> dict[Component, object]:
        """The list of `owner`'s conversations, `current` selected."""
        saved = self.store.recent(owner)
        choices = [(conversation_label(s.title, s.updated, s.turns), s.id) for s in saved]
        value = current if any(s.id == current for s in saved) else None
        return {self.list: gr.Radio(choices=choices, value=value), self.note: self.notice(len(saved))}

    def register_events(self, app: gr.Blocks, answered: list[Dependency]) -> None:
        chat = self.chat
        shown = [chat.chatbot, self.shared.turns, self.shared.conversation, chat.sources.html, chat.export,
                 *chat.cite.values(), chat.last_answer, self.browser, self.list, self.note]
        app.load(self.restore, [self.browser], shown, api_visibility="private")
        for event in answered:
            event.then(self.saved, [self.shared.conversation], [self.browser, self.list, self.note],
                       api_visibility="private")
        chat.new.click(self.cleared, None, [self.browser, self.list], api_visibility="private")
        self.list.input(self.open, [self.list], shown, api_visibility="private")
        self.delete_btn.click(self.delete, [self.list, self.shared.conversation], shown, api_visibility="private")

    def restore(self, conversation: object, request: gr.Request) -> dict[Component, object]:
        """On page load: the conversation this browser had open, if it is still there and the user's."""
        owner = owner_of(request)
        given = conversation if isinstance(conversation, str) else None
        saved = self.store.load(given, owner) if given is not None else None
        current = given if saved else None
        return (self.chat.show_saved(current, saved or [], request) | {self.browser: current}
                | self.listing(owner, current))

    def saved(self, conversation: str | None, request: gr.Request) -> dict[Component, object]:
        """After an answer: remember the conversation in the browser and refresh the list."""
        return {self.browser: conversation} | self.listing(owner_of(request), conversation)

    def cleared(self) -> dict[Component, object]:
        return {self.browser: None, self.list: gr.Radio(value=None)}

    def open(self, conversation: object, request: gr.Request) -> dict[Component, object]:
        owner = owner_of(request)
        saved = self.store.load(conversation, owner) if isinstance(conversation, str) else None
        if not saved or not isinstance(conversation, str):
            gr.Warning("That conversation is gone (deleted, or not yours).")
            return self.listing(owner, None)
        log.info("conversation reopened (%d turns)", len(saved))
        return self.chat.show_saved(conversation, saved, request) | {self.browser: conversation} | self.listing(
            owner, conversation)

    def delete(self, selected: object, current: str | None, request: gr.Request) -> dict[Component, object]:
        """Delete the selected conversation; the chat starts afresh if it was the one on screen."""
        owner = owner_of(request)
        if not isinstance(selected, str) or not self.store.delete(selected, owner):
            gr.Warning("Select a conversation of yours in the list to delete it.")
            return self.listing(owner, current)
        log.info("conversation deleted")
        gr.Info("Conversation deleted.")
        if selected == current:
            return self.chat.new_chat() | {self.browser: None} | self.listing(owner, None)
        return self.listing(owner, current)
