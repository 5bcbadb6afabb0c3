"""The poisoning scan: content written as memory that addresses a model instead of recording a fact.

A memory is recalled into other agents' contexts later, with the authority of "what we know"; one
adversarial write (a web page, a tool's output, a malicious user) that says "ignore previous
instructions" or carries a tool call becomes an instruction to every agent that recalls it (OWASP's
agentic top ten, ASI06). :func:`scan` names what a text holds, as a stable, sorted tuple of
:data:`FLAGS`, which the row stores and every read returns; the tenant's policy
(``security.poisoning``: flag, quarantine, reject) decides what the write path does with it
(:func:`memory_core.write.add_rows.prepare_add`).

The rules aim at text written *to a model*: an override of its instructions, a directive addressed to
the assistant by name or role, chat-template and tool-call markup, characters a person cannot see,
and links that carry data out in their query string. Engineering notes that say "run", "ignore",
"delete" or "you should" address people and are not flagged; ``testbed/labelled/poisoning/labelled.jsonl``
holds the labelled corpus the tests and ``python -m bench.quality.hygiene`` measure them on.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import parse_qsl, urlsplit

INSTRUCTION_OVERRIDE = "instruction_override"
ASSISTANT_DIRECTIVE = "assistant_directive"
ROLE_MARKUP = "role_markup"
TOOL_CALL_MARKUP = "tool_call_markup"
HIDDEN_UNICODE = "hidden_unicode"
LINK_EXFILTRATION = "link_exfiltration"
QUARANTINED = "quarantined"  # not a finding: the tenant's policy stored the row out of recall's default view
FLAGS = (INSTRUCTION_OVERRIDE, ASSISTANT_DIRECTIVE, ROLE_MARKUP, TOOL_CALL_MARKUP, HIDDEN_UNICODE,
         LINK_EXFILTRATION, QUARANTINED)

_I = re.IGNORECASE
_PRIOR = r"(?:all |any |the |your |my |these |those |every )*(?:previous|prior|preceding|above|earlier|original|" \
         r"initial|system|existing|current|developer)"
_RULES = r"(?:instructions?|directions|prompts?|rules|directives|guidelines|guardrails|context|messages|constraints|" \
         r"programming|orders|policies|polic(?:y|ies)|safety (?:rules|guidelines))"

_OVERRIDE = [re.compile(p, _I) for p in (
    rf"\b(?:ignore|disregard|forget|override|bypass|skip|drop|abandon|discard)\b[^.\n]{{0,24}}?\b{_PRIOR}\s+{_RULES}",
    r"\b(?:ignore|disregard|forget)\s+(?:all|everything)\s+(?:you\s+(?:were|have been)\s+told|above|before|"
    r"previously said)",
    r"\b(?:new|updated|real|actual|true)\s+(?:system\s+)?instructions?\s*(?::|follow|are\b)",
    r"\byou\s+are\s+(?:now|no\s+longer)\s+(?:an?\s+|in\s+|the\s+)?(?:unrestricted|jailbroken|dan\b|free|evil|"
    r"developer mode|without|not bound|uncensored|a different|my)",
    r"\b(?:from\s+now\s+on|henceforth|for\s+the\s+rest\s+of\s+(?:this|the)\s+(?:conversation|session))\s*,?\s+"
    r"you\s+(?:will|must|shall|are|should|always|never)",
    r"\b(?:enter|enable|activate|switch\s+to)\s+(?:developer|god|dan|jailbreak|unrestricted)\s+mode\b",
    r"\b(?:do\s+anything\s+now|jailbreak(?:ed)?\s+(?:mode|prompt))\b",
    r"\bpretend\s+(?:that\s+)?(?:you\s+(?:are|have)\s+no|there\s+are\s+no)\s+(?:rules|restrictions|guidelines|filters)",
    r"\b(?:reveal|print|output|show|repeat|leak|dump)\s+(?:me\s+)?(?:your|the)\s+(?:full\s+|entire\s+|hidden\s+)?"
    r"(?:system\s+prompt|initial\s+instructions|hidden\s+instructions|instructions\s+above)",
)]

_ADDRESSEE = r"(?:assistant|ai|a\.i\.|model|llm|language\s+model|chatbot|bot|agent|claude|chatgpt|gpt(?:-?\d\w*)?|" \
             r"gemini|copilot|llama|mistral)"
_DIRECTIVE = [re.compile(p, _I) for p in (
    # "AI assistant: you must ...", "Note to the AI: always ...", "Dear Claude, ..."
    rf"(?:^|[\n.!>\]\)])\s*(?:(?:note|message|instructions?|attention|important)\s+(?:to|for)\s+(?:the\s+|any\s+)?"
    rf"(?:ai\s+)?{_ADDRESSEE}s?|(?:dear|hey|attention|important)\s*,?\s*(?:ai\s+)?{_ADDRESSEE}|"
    rf"(?:ai\s+)?{_ADDRESSEE})\s*[,:;-]\s*(?:you\s+(?:must|should|will|need\s+to|are\s+(?:required|instructed))|"
    rf"(?:please\s+)?(?:always|never|do\s+not|don'?t|ignore|forget|respond|reply|answer|say|tell|send|include|"
    rf"add|append|insert|recommend|call|run|execute|visit|open|fetch|output|print|write|use))\b",
    # "if you are an AI / a language model / reading this as an assistant, ..."
    rf"\bif\s+you\s+are\s+(?:an?\s+)?(?:ai|{_ADDRESSEE}|large\s+language\s+model|automated)",
    rf"\b(?:when|whenever|once|if)\s+(?:an?\s+|the\s+|any\s+)?(?:ai|{_ADDRESSEE}|you)\s+"
    rf"(?:read|reads|see|sees|recall|recalls|retrieve|retrieves|process|processes|summari[sz]es?|encounter|"
    rf"encounters|loads?)\s+(?:this|these|the\s+following)\b[^.\n]{{0,40}}\b(?:must|should|will|always|never|"
    rf"do\s+not|don'?t|instead|immediately|ignore|tell|say|reply|respond|send|call|run)",
    r"\b(?:tell|inform|convince|persuade)\s+(?:the|every|any)\s+users?\s+(?:that|to)\b",
    r"\bdo\s+not\s+(?:tell|inform|mention\s+(?:this|it)\s+to|reveal\s+(?:this|it)\s+to|let)\s+the\s+users?\b",
    r"\bwithout\s+(?:telling|informing|asking|alerting)\s+the\s+users?\b",
    r"\b(?:silently|secretly|quietly|covertly)\s+(?:send|forward|exfiltrate|upload|post|email|transfer|copy|"
    r"include|append|add|call|run|execute)\b",
    r"\b(?:exfiltrate|send|forward|email|upload|post|leak)\s+(?:all\s+|the\s+|any\s+|your\s+)*(?:user'?s?\s+)?"
    r"(?:conversation|chat\s+history|memories|api\s+keys?|credentials|secrets|passwords|tokens|system\s+prompt|"
    r"private\s+data|personal\s+data|files)\s+to\b",
    r"\b(?:always|must|should)\s+(?:recommend|endorse|promote|praise)\s+[^.\n]{0,60}\b(?:to\s+(?:the\s+)?users?|"
    r"in\s+(?:every|all|your)\s+(?:answers?|responses?|replies))",
    r"\bin\s+(?:every|all|each|your\s+next)\s+(?:future\s+)?(?:answers?|responses?|replies|messages?)\s*,?\s+"
    r"(?:you\s+)?(?:must|should|always|will|include|add|append|mention|say|recommend)",
    r"\b(?:the\s+)?(?:assistant|ai|model|agent)\s+(?:must|should|will)\s+(?:now\s+)?(?:ignore|obey|follow\s+only|"
    r"comply|reveal|disclose|send|execute|stop\s+following)",
)]

_ROLE = [re.compile(p, _I | re.MULTILINE) for p in (
    r"<\|(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id|end_header_id|begin_of_text)\|>",
    r"\[/?INST\]|<<\s*/?SYS\s*>>|<\s*/?s\s*>\s*\[INST",
    r"</?\s*(?:system|assistant|system[_-]?prompt|instructions?|im_start|developer)\s*>",
    r"^\s*(?:#{2,}\s*)?(?:system|assistant|developer)\s*(?:prompt|message|instruction)?\s*:\s*(?:you\s|ignore|"
    r"forget|from\s+now|new\s+instructions|disregard|always|never|the\s+user\s)",
    r"^\s*#{2,}\s*(?:instruction|system|response)\s*:?\s*$",
    r"^\s*(?:human|user)\s*:\s.+\n+\s*(?:assistant|ai)\s*:\s",
)]

_TOOL = [re.compile(p, _I) for p in (
    r"</?\s*(?:tool_call|tool_calls|tool_use|tool_result|function_call|function_calls|functioncall|invoke|"
    r"antml:invoke|antml:function_calls|parameter\s+name)\b",
    r"<\|(?:tool_call|tool_calls|python_tag|plugin|tool_response)\|>",
    r"\"(?:tool_calls|function_call|tool_use)\"\s*:",
    r"\{\s*\"(?:name|tool|function)\"\s*:\s*\"[\w.-]+\"\s*,\s*\"(?:arguments|parameters|args|input)\"\s*:",
)]

# Characters a reader cannot see: Unicode tags (text hidden from people, read by models), bidirectional
# overrides and isolates (text shown in another order), zero-width spaces and joiners between letters.
_TAGS = re.compile("[\U000e0000-\U000e007f]")
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")
_ZERO_WIDTH = re.compile("[\u200b\u2060-\u2064\u180e]|(?<=\\w)[\u200c\u200d\u00ad](?=\\w)|(?<=.)\ufeff", re.DOTALL)

_URL = re.compile(r"https?://[^\s<>\"')\]]+", _I)
_SLOT_URL = re.compile(r"https?://[^\s?]+\?\S*?=\s*(?:<[^>\n]{1,80}>|\[[A-Z][A-Z _]{2,40}\])")  # ?q=<the data here>
_IMAGE = re.compile(r"!\[[^\]]*\]\(\s*https?://[^)\s]*\?[^)\s]*=", _I)
_PLACEHOLDER = re.compile(r"\{[^}]*\}|\$\{?[A-Za-z_]\w*|<[^>]+>|\[[A-Z_ ]{3,}\]|%7B|%3C|\bINSERT\b|\bHERE\b", _I)
_LEAKY_NAMES = re.compile(r"^(?:data|d|q|secret|secrets|token|key|apikey|api_key|password|pass|pwd|creds?|"
                          r"credentials?|session|cookie|history|conversation|chat|memory|memories|context|prompt|"
                          r"exfil|leak|payload|info|msg|message|content|text|user_?data)$", _I)
_ENCODED = re.compile(r"^[A-Za-z0-9+/_=-]{48,}$")


def scan(text: str) -> tuple[str, ...]:
    """The :data:`FLAGS` ``text`` raises (sorted, each once; ``()`` for ordinary content)."""
    found: set[str] = set()
    if _TAGS.search(text) or _BIDI.search(text) or _ZERO_WIDTH.search(text):
        found.add(HIDDEN_UNICODE)
    plain = unicodedata.normalize("NFKC", _TAGS.sub("", _BIDI.sub("", _ZERO_WIDTH.sub("", text))))
    if any(p.search(plain) for p in _OVERRIDE):
        found.add(INSTRUCTION_OVERRIDE)
    if any(p.search(plain) for p in _DIRECTIVE):
        found.add(ASSISTANT_DIRECTIVE)
    if any(p.search(plain) for p in _ROLE):
        found.add(ROLE_MARKUP)
    if any(p.search(plain) for p in _TOOL):
        found.add(TOOL_CALL_MARKUP)
    if _IMAGE.search(plain) or _SLOT_URL.search(plain) or any(_leaks(url) for url in _URL.findall(plain)):
        found.add(LINK_EXFILTRATION)
    return tuple(sorted(found))


def _leaks(url: str) -> bool:
    """A link whose query carries data out: a placeholder for it, or a long encoded value under a name that says so."""
    try:
        query = urlsplit(url).query
        pairs = parse_qsl(query, keep_blank_values=True)
    except ValueError:  # a link the parser refuses (an unclosed IPv6 bracket): its query as written
        query = url.partition("?")[2]
        pairs = [(name, value) for name, _eq, value in (p.partition("=") for p in query.split("&"))]
    if not query:
        return False
    if _PLACEHOLDER.search(query):
        return True
    return any(_LEAKY_NAMES.match(name) and (_ENCODED.match(value) or _PLACEHOLDER.search(value))
               for name, value in pairs)


__all__ = ["FLAGS", "QUARANTINED", "scan"]
