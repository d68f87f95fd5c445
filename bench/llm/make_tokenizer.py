# Builds a Hugging Face tokenizer directory from a GGUF file's own vocabulary (the tokens, their
# scores and types it holds), so that a client that needs a tokenizer (GuideLLM) counts the
# model's tokens offline: a Unigram model with byte fallback, "▁" for spaces, as SentencePiece.
#   python make_tokenizer.py MODEL.gguf OUT_DIR
import sys

import gguf
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
from transformers import PreTrainedTokenizerFast

src, out = sys.argv[1], sys.argv[2]
r = gguf.GGUFReader(src)


def field(name):
    f = r.fields[name]
    return [f.parts[i] for i in f.data]


tokens = [bytes(p).decode("utf-8") for p in field("tokenizer.ggml.tokens")]
scores = [float(p[0]) for p in field("tokenizer.ggml.scores")]
vocab = list(zip(tokens, scores))
tok = Tokenizer(models.Unigram(vocab, unk_id=0, byte_fallback=True))
tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
tok.pre_tokenizer = pre_tokenizers.Split("\u2581", behavior="merged_with_next")
tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)])
PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>").save_pretrained(out)
print("saved", out, len(tokens), "tokens")
