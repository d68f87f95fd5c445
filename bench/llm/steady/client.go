//go:build ignore

// An independent streaming client for bench/llm/agreement.sh, in Go (its goroutines wake within
// microseconds, so its own scheduling is a small part of what it times): it sends the streamed
// text completion bolide's scenario sends, RATE requests a second (evenly spaced) for SECONDS,
// and times each as vLLM's benchmark does: TTFT from the request sent to the first chunk with
// text, ITL every gap between two such chunks. Run with GOGC=off (bench/llm/agreement.sh does):
// a bounded run's garbage is a few MB, and no collection pauses a read. Prints one JSON line: requests, tokens (chunks with
// text), events, errors, TTFT and ITL percentiles (ms) and its own CPU seconds.
//
//	go run client.go URL MODEL RATE SECONDS MAX_TOKENS
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptrace"
	"os"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"
)

type result struct {
	ttft   float64
	itl    []float64
	tokens int
	events int
	ok     bool
}

func main() {
	url, model := os.Args[1], os.Args[2]
	rate, _ := strconv.ParseFloat(os.Args[3], 64)
	seconds, _ := strconv.ParseFloat(os.Args[4], 64)
	maxTokens, _ := strconv.Atoi(os.Args[5])
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4096, DisableCompression: true}, Timeout: 120 * time.Second}
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": "time people way water", "max_tokens": maxTokens,
		"stream": true, "stream_options": map[string]bool{"include_usage": true}, "ignore_eos": true})
	var mu sync.Mutex
	var wg sync.WaitGroup
	var all []result
	start := time.Now()
	for i := 0; float64(i)/rate < seconds; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := one(client, url+"/v1/completions", body)
			mu.Lock()
			all = append(all, r)
			mu.Unlock()
		}()
	}
	wg.Wait()
	var ttft, itl []float64
	out := map[string]any{"requests": 0, "tokens": 0, "events": 0, "errors": 0}
	for _, r := range all {
		out["tokens"] = out["tokens"].(int) + r.tokens
		out["events"] = out["events"].(int) + r.events
		if !r.ok {
			out["errors"] = out["errors"].(int) + 1
			continue
		}
		out["requests"] = out["requests"].(int) + 1
		if r.tokens > 0 {
			ttft = append(ttft, r.ttft)
		}
		itl = append(itl, r.itl...)
	}
	out["ttft_p50_ms"], out["ttft_p99_ms"] = pct(ttft, 50), pct(ttft, 99)
	out["itl_p50_ms"], out["itl_p99_ms"] = pct(itl, 50), pct(itl, 99)
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	out["cpu_s"] = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}

func one(client *http.Client, url string, body []byte) result {
	var r result
	// Timed from the moment the request has its connection (a new one's connect is not the
	// server's time to the first token), as bolide times a chat on its user's open connection.
	sent := time.Now()
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { sent = time.Now() }}
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		return r
	}
	req.Header.Set("content-type", "application/json")
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := client.Do(req)
	if err != nil {
		return r
	}
	defer resp.Body.Close()
	rd := bufio.NewReaderSize(resp.Body, 64<<10)
	var last time.Time
	for {
		line, err := rd.ReadSlice('\n')
		if err != nil {
			return r
		}
		if !bytes.HasPrefix(line, []byte("data:")) {
			continue
		}
		r.events++
		data := bytes.TrimSpace(line[5:])
		if string(data) == "[DONE]" {
			r.ok = true
			return r
		}
		var c struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
		}
		if json.Unmarshal(data, &c) != nil || len(c.Choices) == 0 || c.Choices[0].Text == "" {
			continue
		}
		now := time.Now()
		r.tokens++
		if last.IsZero() {
			r.ttft = float64(now.Sub(sent).Nanoseconds()) / 1e6
		} else {
			r.itl = append(r.itl, float64(now.Sub(last).Nanoseconds())/1e6)
		}
		last = now
	}
}

// The p-th percentile, nearest rank on the sorted values (as bench/llm/client.py takes it).
func pct(xs []float64, p float64) any {
	if len(xs) == 0 {
		return nil
	}
	sort.Float64s(xs)
	return xs[int(math.Min(float64(len(xs)-1), math.Round(p/100*float64(len(xs)-1))))]
}
