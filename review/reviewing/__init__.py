"""One reviewer's loop: what a reviewer sees of an item and what they do with it.

`items` (prefixes and responses, reveal), `trajectory` (the display model of an
agent run), `criteria` (the gates and rubric criteria of agent runs and graded
conversations), `queue` (what comes next), `drafts`, `blinding` (what may be
shown) and `answers` (what an answer may be).
"""
