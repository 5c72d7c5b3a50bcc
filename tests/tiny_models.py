"""Tiny randomly initialised causal LMs with an offline-trained tokenizer, built inside tests."""

from __future__ import annotations

from pathlib import Path

CORPUS = [
    "the weather this morning was cold and grey",
    "my neighbour told me that the train was late",
    "you are such an idiot for saying that",
    "shut up and listen to me",
    "the city council voted to build a new bridge",
    "scientists have discovered that the river is clean",
] * 4

CHAT_TEMPLATE = (
    "{% for m in messages %}<|user|> {{ m['content'] }} <|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def build_tokenizer(chat: bool = False):  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<unk>", "<pad>", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|end|>"]
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", bos_token="<s>",
                                   eos_token="</s>")
    if chat:
        fast.chat_template = CHAT_TEMPLATE
    return fast


def make_tiny_lm(path: Path, arch: str = "gpt2", chat: bool = False, context: int = 128, seed: int = 0) -> Path:
    """Save a tiny random ``arch`` model (gpt2 | llama | gemma3) and its tokenizer in ``path``; return ``path``."""
    import torch
    from transformers import AutoModelForCausalLM, Gemma3TextConfig, GPT2Config, LlamaConfig

    tok = build_tokenizer(chat)
    vocab = len(tok)
    common = {"vocab_size": vocab, "bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id,
              "pad_token_id": tok.pad_token_id}
    if arch == "gpt2":
        config = GPT2Config(n_layer=2, n_head=2, n_embd=32, n_positions=context, **common)
    elif arch == "llama":
        config = LlamaConfig(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=32,
                             intermediate_size=64, max_position_embeddings=context, **common)
    elif arch == "gemma3":  # the architecture of the embedded gemma-3-270m (sliding + global attention)
        config = Gemma3TextConfig(num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                                  hidden_size=32, intermediate_size=64, max_position_embeddings=context,
                                  sliding_window=8, **common)
    else:
        raise ValueError(arch)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path
