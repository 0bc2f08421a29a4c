"""Sends 16 greedy chat prompts to an OpenAI-compatible server one at a time, then all 16 at
once, and says how many answers are identical. Standard library only (runs on the device).

usage: alone_vs_batched.py BASE_URL ANSWERS_JSON
"""

import json
import sys
import threading
import urllib.request

PROMPTS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain photosynthesis in two sentences.",
    "List three prime numbers greater than 50.",
    "Translate 'good morning' into Spanish and German.",
    "What is 17 times 23?",
    "Give me a short tip for learning to cook.",
    "Describe a cat to someone who has never seen one.",
    "Write a Python function that reverses a string.",
    "Why is the sky blue?",
    "Name the planets of the solar system in order.",
    "Summarize the plot of Romeo and Juliet in one paragraph.",
    "What are the health benefits of walking?",
    "Suggest a name for a bakery.",
    "How does a bicycle stay upright?",
    "Write a limerick about a programmer.",
]
MAX_TOKENS = 128


def ask(base: str, prompt: str) -> str:
    body = json.dumps({
        "model": "smollm2",
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
    }).encode()
    req = urllib.request.Request(base + "/v1/chat/completions", data=body,
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())["choices"][0]["message"]["content"]


def main():
    base, path = sys.argv[1], sys.argv[2]
    alone = [ask(base, p) for p in PROMPTS]
    batched = [None] * len(PROMPTS)
    start = threading.Barrier(len(PROMPTS))

    def one(i):
        start.wait()
        batched[i] = ask(base, PROMPTS[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    same = [a == b for a, b in zip(alone, batched)]
    first_diff = [next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                  for a, b in zip(alone, batched)]
    json.dump({"prompts": PROMPTS, "alone": alone, "batched": batched}, open(path, "w"), indent=1)
    differing = [f"{i} (char {first_diff[i]})" for i in range(len(PROMPTS)) if not same[i]]
    print(f"{sum(same)} of {len(PROMPTS)} identical alone vs batched"
          + (f"; differ: {', '.join(differing)}" if differing else ""))


if __name__ == "__main__":
    main()
