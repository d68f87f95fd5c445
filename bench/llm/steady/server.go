//go:build ignore

// A steady OpenAI-compatible streaming server for bench/llm/agreement.sh: POST /v1/completions
// and /v1/chat/completions wait TTFT_MS, then stream max_tokens chunks ITL_MS apart (each
// flushed as one chunk of a chunked HTTP/1.1 body), the finish chunk, the usage and [DONE];
// GET /v1/models names one model. Go's timers keep the server's own spread small, so that two
// clients timing it see the same distribution. Listens on 127.0.0.1 only.
//
//	go run server.go PORT TTFT_MS ITL_MS
package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"
)

func main() {
	port := os.Args[1]
	ttft := ms(os.Args[2])
	itl := ms(os.Args[3])
	http.HandleFunc("/v1/models", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("content-type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[{"id":"steady","object":"model"}]}`)
	})
	stream := func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			MaxTokens int             `json:"max_tokens"`
			Messages  json.RawMessage `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.MaxTokens <= 0 {
			http.Error(w, "a JSON body with max_tokens", http.StatusBadRequest)
			return
		}
		chat := len(body.Messages) > 0
		flusher := w.(http.Flusher)
		w.Header().Set("content-type", "text/event-stream")
		w.Header().Set("cache-control", "no-cache")
		w.WriteHeader(http.StatusOK)
		flusher.Flush()
		send := func(v any) {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "data: %s\n\n", b)
			flusher.Flush()
		}
		choice := func(text string, finish any) map[string]any {
			if chat {
				delta := map[string]any{}
				if text != "" {
					delta["content"] = text
				}
				return map[string]any{"index": 0, "delta": delta, "finish_reason": finish}
			}
			return map[string]any{"index": 0, "text": text, "finish_reason": finish}
		}
		chunk := func(c any, usage any) map[string]any {
			m := map[string]any{"id": "s", "object": "chunk", "model": "steady", "choices": []any{}}
			if c != nil {
				m["choices"] = []any{c}
			}
			if usage != nil {
				m["usage"] = usage
			}
			return m
		}
		// Each token due at a fixed time from the request: a late wake-up does not push the rest.
		start := time.Now()
		for i := 0; i < body.MaxTokens; i++ {
			time.Sleep(time.Until(start.Add(ttft + time.Duration(i)*itl)))
			send(chunk(choice(fmt.Sprintf("t%d ", i), nil), nil))
		}
		send(chunk(choice("", "length"), nil))
		send(chunk(nil, map[string]int{"prompt_tokens": 4, "completion_tokens": body.MaxTokens, "total_tokens": 4 + body.MaxTokens}))
		fmt.Fprint(w, "data: [DONE]\n\n")
		flusher.Flush()
	}
	http.HandleFunc("/v1/completions", stream)
	http.HandleFunc("/v1/chat/completions", stream)
	fmt.Println("port", port)
	if err := http.ListenAndServe("127.0.0.1:"+port, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func ms(s string) time.Duration {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "not a number of milliseconds:", s)
		os.Exit(2)
	}
	return time.Duration(f * float64(time.Millisecond))
}
