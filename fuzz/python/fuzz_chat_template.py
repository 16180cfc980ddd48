"""atheris harness: chat-template rendering in the bounded sandbox (colibri.template_limits).

    python fuzz/python/fuzz_chat_template.py CORPUS_DIR [libFuzzer flags]

Input parts: the template, then the messages as JSON (a list, or {"messages", "tools",
"documents"}; unreadable JSON falls back to a fixed conversation). Rendering may only raise
ValueError, and must end within the render deadline (lowered to 1 s here) plus slack.
"""
from __future__ import annotations

import json
import time

from common import MESSAGES, instrumented, run, split_parts

with instrumented():
    from colibri import template_limits
    from colibri.chat_template import render_chat

template_limits.MAX_RENDER_SECONDS = 1.0
SLACK_SECONDS = 3.0


def test_one_input(data: bytes) -> None:
    template, messages = split_parts(data, 2)
    try:
        request = json.loads(messages)
    except (ValueError, RecursionError):
        request = MESSAGES
    tools = documents = None
    if isinstance(request, dict):
        tools, documents, request = request.get("tools"), request.get("documents"), request.get("messages", MESSAGES)
    start = time.process_time()
    try:
        render_chat(template.decode("utf-8", "replace"), request, bos_token="<s>", eos_token="</s>", tools=tools,
                    documents=documents, add_generation_prompt=len(data) % 2 == 0)
    except ValueError:
        pass
    elapsed = time.process_time() - start   # CPU time: the deadline itself is by the clock, so this only grows
    if elapsed > template_limits.MAX_RENDER_SECONDS + SLACK_SECONDS:
        raise RuntimeError(f"rendering took {elapsed:.1f} CPU seconds, past the "
                           f"{template_limits.MAX_RENDER_SECONDS} s deadline")


if __name__ == "__main__":
    run(test_one_input)
