"""The requests every step sends: a long shared system prompt (a station's manual), short
questions, and the chat template that turns them into one prompt.

The manual is made from a fixed random seed, so every run sends the same words. Its length is
counted in tokens by whoever counts (Qwen's tokenizer on paper, the server's own in the GPU
steps): the manual for a target of L tokens is the shortest run of entries whose tokens reach
L. Each copy of the manual starts with a label ("Manual copy 03B."), so two copies share only
the few tokens before the label's first difference: a new copy is a prefix the server has never
seen. Standard library only.
"""

from __future__ import annotations

import random
from collections.abc import Callable

SEED = 2026
LENGTHS = (1000, 2000, 4000, 8000)  # the shared prefix's target lengths, in tokens
TINY_DIVISOR = 8  # --tiny: every length / 8
HEAD = "You are the operations assistant of the Hollow Creek water station."
RULE = "Answer in one sentence, from the manual below, and name the section you used."
QUESTIONS = (
    "Which valve must be closed before the north pump is serviced?",
    "How often is the chlorine dosing unit recalibrated?",
    "Who may sign off a change of the main sand filter?",
    "What pressure should the booster pump hold at night?",
    "When are the east reservoir's water samples taken?",
    "Describe the first step after a power cut at the intake.",
    "Tell me what to log when the settling tank is flushed.",
    "List the checks made before the fence line walk.",
)
PARTS = ("north pump", "south pump", "booster pump", "intake screen", "sand filter",
         "settling tank", "chlorine dosing unit", "east reservoir", "pressure valve 3")  # fmt: skip
ACTIONS = ("inspect", "grease", "recalibrate", "flush", "replace the seals of",
           "log the readings of", "test the alarm of", "clean")  # fmt: skip
WHO = ("the shift lead", "the duty engineer", "the station manager", "any trained operator")
WHEN = ("every morning", "at the end of each shift", "once a week", "on the first day of the month",
        "after heavy rain", "whenever the alarm sounds")  # fmt: skip


def entry(rng: random.Random, number: int) -> str:
    """One numbered section of the manual."""
    part, action = rng.choice(PARTS), rng.choice(ACTIONS)
    return (
        f"\n\nSection {number}. {rng.choice(WHEN).capitalize()}, {rng.choice(WHO)} must {action}"
        f" the {part}. The reading must stay between {rng.randint(2, 5)}.{rng.randint(0, 9)} and"
        f" {rng.randint(6, 9)}.{rng.randint(0, 9)} bar; outside that range, close pressure valve"
        f" {rng.randint(1, 6)}, note the time and call {rng.choice(WHO)}."
    )


def entries(count: int) -> list[str]:
    """The first `count` sections (the same ones every time)."""
    rng = random.Random(SEED)
    return [entry(rng, i + 1) for i in range(count)]


def manual(count: int, label: str, edit_at: int | None = None) -> str:
    """The system prompt: the label, the two opening sentences, then `count` sections; with
    `edit_at`, the first reading in that section is one tenth of a bar higher (one changed
    word, the kind of edit a revised document carries)."""
    parts = entries(count)
    if edit_at is not None:
        text = parts[edit_at]
        at = text.index("between ") + len("between ")
        value = text[at : at + 3]
        higher = f"{float(value) + 0.1:.1f}" if value != "5.9" else "5.8"
        parts[edit_at] = text[:at] + higher + text[at + 3 :]
    return f"Manual copy {label}. {HEAD} {RULE}" + "".join(parts)


def fit(tokens: int, count_tokens: Callable[[str], int]) -> int:
    """The fewest sections whose manual reaches `tokens` tokens (label and opening included)."""
    low, high = 1, 1
    while count_tokens(manual(high, "00A")) < tokens:
        low, high = high, high * 2
    while low < high:  # the smallest count in [low, high] that reaches the target
        mid = (low + high) // 2
        if count_tokens(manual(mid, "00A")) >= tokens:
            high = mid
        else:
            low = mid + 1
    return high


def length_key(length: int) -> str:
    """A length's name in the results files, the same with --tiny ('8k' for 8,000 tokens, or
    for its eighth): what a page quotes must be found in a learner's shrunk run too."""
    return f"{length // 1000}k"


def label(round_no: int, length_index: int) -> str:
    """A copy's label: the round in two digits, the length as a letter ('03B')."""
    return f"{round_no:02d}{'ABCDEFGH'[length_index]}"


def messages(system: str, question: str) -> list[dict[str, str]]:
    """The chat a client sends: the manual as the system message, then one question."""
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


def render(chat: list[dict[str, str]], date: str | None = None) -> str:
    """Qwen3's chat template (ChatML) for these messages, with the generation prompt. With
    `date`, a template that writes today's date at the top of the system turn, as some models'
    templates do (Llama 3.1's writes "Today Date: 26 Jul 2024" there)."""
    out = ""
    for m in chat:
        content = m["content"]
        if date is not None and m["role"] == "system":
            content = f"Today is {date}.\n{content}"
        out += f"<|im_start|>{m['role']}\n{content}<|im_end|>\n"
    return out + "<|im_start|>assistant\n"


def common_prefix(a: list[int], b: list[int]) -> int:
    """How many tokens two prompts share from their start."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def llama_reuse(held: list[int], prompt: list[int]) -> int:
    """Tokens llama-server takes from a slot's cache: those before the first token where the
    prompt differs from what the slot holds, but never the whole prompt (the last token is
    always computed: its logits give the first new token)."""
    return min(common_prefix(held, prompt), len(prompt) - 1)


def block_reuse(held: list[int], prompt: list[int], block: int = 16) -> int:
    """Tokens a block-hashing engine (vLLM: blocks of 16) takes from its cache for the same
    prompt: whole blocks only, each block's hash covering every token before it, and never the
    last token."""
    return llama_reuse(held, prompt) // block * block
