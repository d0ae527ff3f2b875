"""Greedy generation from one prompt, with or without GCAV steering (:mod:`empirical.llm._edits`).

The new tokens are bounded by the model's positions (a learned position table, else the configured
context). The batched, cached generation of the steering measurement lives in
:mod:`empirical.llm._steering_eval`.
"""
from __future__ import annotations

import torch
from tqdm.auto import tqdm

from empirical.common.checks import check_int

from ._edits import SteerState, gcav_steering, model_positions
from ._extract import check_prompts
from ._gcav import GcavRule
from ._hooks import input_device, position_limit, require_decoder

__all__ = ["generate_ids", "generate", "compare_generations"]


def generate_ids(model, tokenizer, prompt, max_new_tokens=20, **gen_kwargs) -> tuple[list, list]:
    """Greedy generation from one prompt: (prompt token ids, generated token ids; EOS included if produced).

    Parameters
    ----------
    model, tokenizer : transformers causal LM and its tokenizer
        A decoder-only model and the tokenizer it was trained with.
    prompt : str
        One prompt, tokenized by ``tokenizer`` as is (with its default special tokens).
    max_new_tokens : int >= 1
        At most the model's positions (``max_position_embeddings`` / ``n_positions``) minus the prompt's tokens.
    **gen_kwargs
        Passed to ``model.generate`` (override the greedy defaults).

    Returns
    -------
    (list of int, list of int)
        The prompt's token ids and the generated ones (at most ``max_new_tokens``; EOS included if produced).
    """
    require_decoder(model, "generation")
    (prompt,) = check_prompts([prompt], "prompt")
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens")
    enc = tokenizer(prompt, return_tensors="pt").to(input_device(model))
    # a learned position table is a hard limit; otherwise the configured context (rotary models) bounds the text
    limit = position_limit(model) or model_positions(model)
    n_prompt = int(enc["input_ids"].shape[1])
    if limit and n_prompt + max_new_tokens > limit:
        raise ValueError(f"max_new_tokens must be at most the model's {limit} positions minus the prompt's "
                         f"{n_prompt} tokens = {max(limit - n_prompt, 0)}, got {max_new_tokens}")
    kw = dict(max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    kw.update(gen_kwargs)
    with torch.inference_mode():
        out = model.generate(**enc, **kw)
    prompt_ids = enc["input_ids"][0].tolist()
    return prompt_ids, out[0, len(prompt_ids):].tolist()


def generate(model, tokenizer, prompt, max_new_tokens=20, **gen_kwargs) -> str:
    """Greedy completion of one prompt (the new text only); see :func:`generate_ids`.

    Parameters
    ----------
    model, tokenizer : transformers causal LM and its tokenizer
        A decoder-only model and the tokenizer it was trained with.
    prompt : str
        One prompt.
    max_new_tokens : int >= 1
        Tokens to generate at most (bounded by the model's positions, see :func:`generate_ids`).
    **gen_kwargs
        Passed to ``model.generate`` (override the greedy defaults).

    Returns
    -------
    str
        The generated tokens decoded without special tokens (the prompt is not included).
    """
    return tokenizer.decode(generate_ids(model, tokenizer, prompt, max_new_tokens, **gen_kwargs)[1],
                            skip_special_tokens=True)


def compare_generations(model, tokenizer, prompts, probes, rule: GcavRule | str = "towards", max_new_tokens=20,
                        progress=True) -> list:
    """Original and GCAV-steered greedy completions side by side.

    Parameters
    ----------
    model, tokenizer : transformers causal LM and its tokenizer
        A decoder-only model and the tokenizer it was trained with.
    prompts : list of str
        Prompts, each generated from on its own (no batching).
    probes, rule
        As for :func:`~empirical.llm.steer_prompts` (``rule``: a :class:`~empirical.llm.GcavRule` or a
        direction).
    max_new_tokens : int
        Tokens to generate at most per completion (see :func:`generate_ids`).
    progress : bool
        Show a progress bar.

    Returns
    -------
    list of dict
        ``prompt``, ``direction``, ``original``, ``steered`` per prompt.

    Examples
    --------
    >>> import numpy as np
    >>> from empirical.probes import ConceptVectors, LinearProbe
    >>> from empirical.testing import tiny_model, tiny_tokenizer
    >>> model, tokenizer = tiny_model("llama", seed=0), tiny_tokenizer()
    >>> probes = ConceptVectors({1: LinearProbe(np.ones(32), 0.0, test_accuracy=0.9),
    ...                          2: LinearProbe(-np.ones(32), 0.5, test_accuracy=0.95)})
    >>> rows = compare_generations(model, tokenizer, ["a good film"], probes, max_new_tokens=3, progress=False)
    >>> sorted(rows[0])
    ['direction', 'original', 'prompt', 'steered']
    """
    rule = GcavRule.of(rule)
    direction = rule.direction
    rows = []
    for prompt in tqdm(check_prompts(prompts), desc=f"generate {direction}", disable=not progress, leave=False):
        original = generate(model, tokenizer, prompt, max_new_tokens)
        st = SteerState()
        st.recording = False
        with gcav_steering(model, probes, rule, state=st):
            steered = generate(model, tokenizer, prompt, max_new_tokens)
        rows.append({"prompt": prompt, "direction": direction, "original": original, "steered": steered})
    return rows
