"""A model folder for the serving tests: the tiny Llama shape (random weights through
--load-format dummy) with a real byte-level BPE tokenizer trained here (Llama-3 specials and
chat template), saved through transformers so AutoTokenizer (sglang's bench_serving) loads it.
"""
import json
import os

SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
                 "{{ m['content'] }}<|eot_id|>{% endfor %}"
                 "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}")
CORPUS = ["The quick brown fox jumps over the lazy dog.", "Hello, world! How are you today?",
          "Speculative decoding drafts tokens and verifies them in one forward pass.",
          "def add(a, b):\n    return a + b\n", "Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000",
          "Paged attention keeps the KV cache in fixed-size pages.", "naïve café déjà vu — ünïcödé ✓ 😀"] * 20


def build(path, vocab_size=512):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    os.makedirs(path, exist_ok=True)
    tok = Tokenizer(models.BPE())
    llama3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
              r"|\s+(?!\S)|\s+")
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(llama3), behavior="isolated", invert=False),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - len(SPECIALS), special_tokens=[],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    tok.add_special_tokens(SPECIALS)
    assert tok.get_vocab_size() <= vocab_size, tok.get_vocab_size()
    # As Llama 3's tokenizer.json: the post-processor puts BOS first (Aerie follows it).
    from tokenizers import processors
    bos_id = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A $B",
                                                       special_tokens=[("<|begin_of_text|>", bos_id)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>", eos_token="<|end_of_text|>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(path)
    bos, eos, eot = (tok.token_to_id(t) for t in ("<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"))
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab_size, "hidden_size": 128,
              "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "head_dim": 32, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
              "bos_token_id": bos, "eos_token_id": [eos, eot], "tie_word_embeddings": False, "torch_dtype": "float32"}
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f)
    return fast
