"""folio.apply_chat_template: a chat rendered as Hugging Face's
``tokenizer.apply_chat_template`` renders it, by folio's own Jinja engine
(the same one ``folio serve``, ``folio chat`` and ``folio template`` use), so
its output can be compared with another tool's byte for byte."""
import json
import os
from typing import Any, List, Mapping, Optional, Sequence, Union

from folio import _folio
from folio._engine import ChatMessage


def apply_chat_template(model_or_template: Any, messages: Sequence[ChatMessage],
                        add_generation_prompt: bool = True, tokenize: bool = False, *,
                        chat_template: Optional[str] = None,
                        bos_token: str = "", eos_token: str = "",
                        strftime_now: Optional[int] = None,
                        **kwargs: Any) -> Union[str, List[int]]:
    """The prompt for a chat, as ``apply_chat_template(messages,
    add_generation_prompt=..., tokenize=..., **kwargs)`` makes it.

    model_or_template:
      - a ``folio.LLM`` or ``folio.AsyncLLM``: its model's own template (or
        ``chat_template``: a template's text to use instead), with its bos
        and eos tokens; ``tokenize=True`` gives the ids ``LLM.chat`` sends;
      - a path to a model folder or ``.gguf`` file: loaded as ``folio.LLM``
        with a small KV pool, then as above;
      - a template's Jinja source: rendered with ``bos_token``,
        ``eos_token`` and ``strftime_now`` (seconds since the epoch, UTC;
        default: local now) as given, and the messages exactly as given
        (any roles and keys, as Hugging Face passes them; a model's path
        checks them as ``LLM.chat`` and ``folio serve`` do);
        ``tokenize=True`` needs a model.

    kwargs become template variables (tools, documents, anything else), as
    in Hugging Face's signature. ValueError for a template that does not
    parse or that raises (its message starts "chat template raised: "),
    NotImplementedError for a construct folio does not support.
    """
    from folio.async_llm import AsyncLLM
    from folio.llm import LLM

    model = model_or_template
    if isinstance(model, (str, os.PathLike)) and os.path.exists(model):
        model = LLM(os.fspath(model), num_pages=16, max_num_seqs=1)
    if isinstance(model, (LLM, AsyncLLM)):
        tokenizer = model.get_tokenizer()
        return tokenizer.apply_chat_template(messages, tokenize=tokenize,
                                             add_generation_prompt=add_generation_prompt,
                                             chat_template=chat_template, **kwargs)
    if not isinstance(model, str):
        raise TypeError("model_or_template must be a folio.LLM, a model path or a template's "
                        f"source, not {type(model).__name__}")
    if tokenize:
        raise ValueError("tokenize=True needs a model (a folio.LLM or a model path), "
                         "not a template's source")
    variables: Mapping[str, Any] = {
        "messages": list(messages),
        "tools": None,
        "documents": None,
        "add_generation_prompt": add_generation_prompt,
        "bos_token": bos_token,
        "eos_token": eos_token,
        **kwargs,
    }
    return str(_folio.render_chat_template(chat_template or model, json.dumps(variables),
                                           strftime_now))
