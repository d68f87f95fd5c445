# Writes a tiny random-weight llama GGUF (a few hundred KB, no download) with an SPM-style
# byte-fallback vocabulary, for bench/sse-llm.sh: python make_tiny_gguf.py OUT.gguf
import sys, numpy as np, gguf
out = sys.argv[1] if len(sys.argv) > 1 else "tiny.gguf"
E, L, FF, H, HKV, CTX = 64, 2, 128, 4, 4, 2048
toks = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
types = [2, 3, 3] + [6] * 256            # UNKNOWN, CONTROL, CONTROL, BYTE...
words = ["\u2581", "\u2581the", "\u2581a", "\u2581hello", "\u2581world", "e", "t", "o", "a", "n"]
toks += words; types += [1] * len(words)   # NORMAL
V = len(toks)
w = gguf.GGUFWriter(out, "llama")
w.add_name("tiny-random"); w.add_context_length(CTX); w.add_embedding_length(E)
w.add_block_count(L); w.add_feed_forward_length(FF); w.add_head_count(H)
w.add_head_count_kv(HKV); w.add_layer_norm_rms_eps(1e-5); w.add_rope_dimension_count(E // H)
w.add_file_type(gguf.LlamaFileType.ALL_F32)
w.add_tokenizer_model("llama"); w.add_token_list(toks)
w.add_token_scores([0.0] * (3 + 256) + [-float(i) for i in range(len(words))])
w.add_token_types(types); w.add_bos_token_id(1); w.add_eos_token_id(2); w.add_unk_token_id(0)
w.add_add_bos_token(True); w.add_add_eos_token(False)
w.add_chat_template("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}<|assistant|>")
r = np.random.default_rng(0)
t = lambda *s: (r.standard_normal(s) * 0.02).astype(np.float32)
w.add_tensor("token_embd.weight", t(V, E)); w.add_tensor("output_norm.weight", np.ones(E, np.float32))
w.add_tensor("output.weight", t(V, E))
for i in range(L):
    p = f"blk.{i}."
    w.add_tensor(p + "attn_norm.weight", np.ones(E, np.float32)); w.add_tensor(p + "ffn_norm.weight", np.ones(E, np.float32))
    for n in ("attn_q", "attn_output"): w.add_tensor(p + n + ".weight", t(E, E))
    for n in ("attn_k", "attn_v"): w.add_tensor(p + n + ".weight", t(HKV * (E // H), E))
    for n in ("ffn_gate", "ffn_up"): w.add_tensor(p + n + ".weight", t(FF, E))
    w.add_tensor(p + "ffn_down.weight", t(E, FF))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
print(out, V, "tokens")
