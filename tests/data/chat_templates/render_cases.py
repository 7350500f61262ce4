#!/usr/bin/env python3
"""Renders the case files of the templates named on the command line with Python's Jinja2, the
way Hugging Face transformers' apply_chat_template does (sandboxed, trim_blocks, lstrip_blocks,
loopcontrols, tojson as json.dumps(..., ensure_ascii=False), raise_exception, strftime_now fixed
at 2026-11-29 12:00:00), so that loom's interpreter is checked against Jinja2 itself.

    python3 render_cases.py google-gemma-3-4b-it allenai-OLMo-2-1124-7B-Instruct ...

The contexts are those of the shared fixtures (../shared/data/chat_templates: simple,
system_multi, no_gen_prompt, tools), plus extra cases listed in EXTRA for one template.
Not run by the test suite: its output is committed, and it needs Python's jinja2.
"""
import datetime
import json
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = datetime.datetime(2026, 11, 29, 12, 0, 0)
TOKENS = {"bos_token": "<s>", "eos_token": "</s>"}

USER = {"role": "user", "content": "Hello! Who are you?"}
CASES = {
    "simple": {"messages": [USER], "add_generation_prompt": True},
    "system_multi": {
        "messages": [
            {"role": "system", "content": "You are a terse assistant."},
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "4."},
            {"role": "user", "content": "And 3+3? Answer with \"six\" or 6 \u2014 \u00fcn\u00efc\u00f6d\u00e9 ok."},
        ],
        "add_generation_prompt": True,
    },
    "no_gen_prompt": {
        "messages": [{"role": "user", "content": "Hi"},
                     {"role": "assistant", "content": "Hello there."}],
        "add_generation_prompt": False,
    },
    "tools": {
        "messages": [
            {"role": "system", "content": "You can call tools."},
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": "", "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}}]},
            {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
             "content": "{\"temp\": 21}"},
            {"role": "user", "content": "Thanks"},
        ],
        "tools": [{"type": "function", "function": {
            "name": "get_weather", "description": "Get the current weather in a city",
            "parameters": {"type": "object", "properties": {
                "city": {"type": "string", "description": "City name"},
                "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}}],
        "add_generation_prompt": True,
    },
}

# Cases that exercise one template's own switches.
EXTRA = {
    "HuggingFaceTB-SmolLM3-3B": {
        "no_think": {"messages": [USER], "add_generation_prompt": True, "enable_thinking": False},
        "system_think_flag": {
            "messages": [{"role": "system", "content": "Be brief. /no_think"},
                         {"role": "user", "content": "Hi"},
                         {"role": "assistant", "content": "\n\nHello."},
                         {"role": "user", "content": "Bye"}],
            "add_generation_prompt": True},
    },
    "ibm-granite-granite-3.3-2b-instruct": {
        "tools_default_system": {"messages": [USER], "add_generation_prompt": True,
                                 "tools": CASES["tools"]["tools"]},
        "thinking": {"messages": [USER], "add_generation_prompt": True, "thinking": True},
    },
    "openai-gpt-oss-120b": {
        "reasoning_high": {"messages": [{"role": "developer", "content": "Be brief."}, USER],
                           "add_generation_prompt": True, "reasoning_effort": "high"},
        "thinking_call": {
            "messages": [USER,
                         {"role": "assistant", "thinking": "Need the weather.", "tool_calls": [{
                             "type": "function", "function": {
                                 "name": "get_weather", "arguments": {"city": "Paris"}}}]},
                         {"role": "tool", "content": "{\"temp\": 21}"}],
            "tools": CASES["tools"]["tools"], "add_generation_prompt": True},
        "channel_in_content": {
            "messages": [USER, {"role": "assistant",
                                "content": "<|channel|>final<|message|>Hi"}, USER],
            "add_generation_prompt": True},
    },
    "google-gemma-3-4b-it": {
        "content_parts": {
            "messages": [{"role": "system", "content": [{"type": "text", "text": "Read the scan."}]},
                         {"role": "user", "content": [{"type": "text", "text": "  What is this?  "}]}],
            "add_generation_prompt": True},
    },
}


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: NOW.strftime(fmt)
    return env


def main():
    env = environment()
    for name in sys.argv[1:]:
        source = open(name + ".jinja", encoding="utf-8").read()
        template = env.from_string(source)
        for case, context in {**CASES, **EXTRA.get(name, {})}.items():
            context = {**context, **TOKENS}
            out = {"template": name + ".jinja", "case": case, "context": context}
            try:
                out["expected"] = template.render(**context)
            except jinja2.exceptions.TemplateError as e:
                out["error"] = f"TemplateError: {e}"
            with open(f"{name}.{case}.json", "w", encoding="utf-8") as f:
                json.dump(out, f, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
