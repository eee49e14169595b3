# SPDX-License-Identifier: Apache-2.0
# Copyright: contributors to the jetson_llm.speculative collection
"""Prompt set for on-device vLLM benchmarks.

Real text, written for this collection and released under Apache-2.0. Random-token prompts
understate the acceptance of speculative decoding (EAGLE heads and draft models are trained on
chat data), so benchmarks that decide whether speculation pays use these prompts instead.

Each prompt is a dict with ``id``, ``kind``, ``messages`` (chat form, for
``/v1/chat/completions``) and ``prompt`` (completion form, for ``/v1/completions``).
``select()`` picks prompts deterministically for a given seed.

Runs on the managed device: Python standard library only, Python 3.8 syntax.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import random
import re

KINDS = ("chat", "summarize", "code", "structured", "translate", "rewrite")

# Completion form of every prompt: the same instruction in a plain-text template, so a
# completions run sends the same content as a chat run.
COMPLETION_TEMPLATE = "### Instruction:\n%s\n\n### Response:\n"

_RAW = (
    # ------------------------------------------------------------------ chat: questions, explanations
    (
        "chat-01",
        "chat",
        "Why is the sky blue during the day but red and orange at sunset? Explain it to a curious twelve-year-old.",
    ),
    (
        "chat-02",
        "chat",
        "What is the difference between RAM and storage in a computer? Give an everyday analogy and say why a computer with more RAM can feel faster.",
    ),
    (
        "chat-03",
        "chat",
        "I keep forgetting to water my houseplants. Suggest a simple routine that would help, and explain how to "
        "tell whether a plant needs water without a moisture meter.",
    ),
    (
        "chat-04",
        "chat",
        "Explain how a refrigerator keeps food cold. Mention the compressor, the refrigerant and why the back of the fridge feels warm.",
    ),
    (
        "chat-05",
        "chat",
        "What are the main causes of inflation, and why do central banks raise interest rates to fight it? Keep the answer under three hundred words.",
    ),
    (
        "chat-06",
        "chat",
        "Explain the difference between a virus and a bacterium, and why antibiotics do not help against a cold.",
    ),
    (
        "chat-07",
        "chat",
        "How does public-key cryptography let two people who have never met agree on a secret over an open network? Use an analogy with padlocks and boxes.",
    ),
    (
        "chat-08",
        "chat",
        "I am preparing for my first half marathon in twelve weeks. I can currently run five kilometres without "
        "stopping. Outline a weekly training plan and the most common beginner mistakes.",
    ),
    (
        "chat-09",
        "chat",
        "What does a compiler do, and how is it different from an interpreter? Give one example language for "
        "each and explain where the line between them gets blurry.",
    ),
    (
        "chat-10",
        "chat",
        "Why do we have seasons on Earth? Many people think it is because the Earth is closer to the Sun in summer. Explain why that is wrong.",
    ),
    (
        "chat-11",
        "chat",
        "Describe how a bill becomes a law in a typical parliamentary democracy, from the first draft to the final signature, in clear numbered steps.",
    ),
    (
        "chat-12",
        "chat",
        "What is the difference between weather and climate? Explain why a single cold winter does not disprove a warming trend.",
    ),
    (
        "chat-13",
        "chat",
        "Give me five practical tips for giving a short technical presentation to a non-technical audience, with a one-sentence reason for each tip.",
    ),
    # ------------------------------------------------------------------ summarisation of a given paragraph
    (
        "summarize-01",
        "summarize",
        "Summarise the following paragraph in two sentences.\n\n"
        "The town of Larkwell grew up around a river crossing where traders once paid a toll to use a wooden "
        "bridge. When the bridge burned in a dry summer, the townspeople argued for years about who should pay "
        "for a new one. The mill owners wanted a stone bridge wide enough for carts, while the farmers on the "
        "far bank preferred a cheaper ferry that they could run themselves. In the end a compromise was reached: "
        "the ferry operated for a decade while a stone bridge was built with money from a small tax on flour. "
        "The bridge still stands, and the old ferry landing is now a park where the town holds its summer market.",
    ),
    (
        "summarize-02",
        "summarize",
        "Write a one-paragraph summary of this text for a busy manager.\n\n"
        "During the last quarter the support team handled about eleven thousand tickets, nine percent more than "
        "in the previous quarter. Median time to first response fell from five hours to just under three, mostly "
        "because the team introduced a rotating triage shift in the morning. However, the share of tickets "
        "reopened after being marked as solved rose from four to seven percent. Interviews suggest that agents "
        "closed tickets too quickly to meet the new response targets. The team proposes to keep the triage shift, "
        "add a short follow-up check before closing a ticket and track reopen rates alongside response times.",
    ),
    (
        "summarize-03",
        "summarize",
        "Summarise the main idea of this passage in a single sentence, then list three key details.\n\n"
        "Honeybees communicate the location of food through a movement known as the waggle dance. A forager "
        "returning to the hive walks in a straight line while shaking her body, then circles back and repeats. "
        "The angle of the straight run relative to vertical tells the other bees the direction of the food "
        "relative to the sun, and the length of the run indicates the distance. Because the sun moves across "
        "the sky, the dancing bee gradually adjusts the angle during the day. Bees that follow the dance leave "
        "the hive and fly in the indicated direction, using smell to find the exact flowers once they are near.",
    ),
    (
        "summarize-04",
        "summarize",
        "Summarise this incident report in three bullet points: cause, impact and follow-up actions.\n\n"
        "At 09:40 on Tuesday the order service began returning errors for roughly a third of requests. The "
        "on-call engineer found that a configuration change deployed at 09:35 had lowered the database "
        "connection pool from fifty connections to five. Under normal morning load the pool was exhausted and "
        "requests timed out. The change was rolled back at 10:05 and error rates returned to normal by 10:08. "
        "About four thousand customer orders were delayed but none were lost. The team will add a validation "
        "rule that rejects pool sizes below twenty and will include connection pool saturation in the alerts.",
    ),
    (
        "summarize-05",
        "summarize",
        "Give a short summary of the following paragraph suitable for a school newsletter.\n\n"
        "This spring the students of the science club built a small weather station on the roof of the library. "
        "The station measures temperature, humidity, air pressure, wind speed and rainfall every five minutes "
        "and sends the readings to a web page that anyone can visit. Over eight weeks the students compared "
        "their readings with the national weather service and found that their temperatures were about one "
        "degree higher, probably because the roof absorbs heat. They plan to move the sensor onto a taller mast "
        "and to use the data in mathematics lessons next term.",
    ),
    (
        "summarize-06",
        "summarize",
        "Summarise the argument of this paragraph and say whether you find it convincing.\n\n"
        "Some city planners argue that building more roads does not reduce traffic congestion in the long run. "
        "When a new lane opens, journeys become faster for a while, which encourages people to drive more often, "
        "to live further from work, or to switch from buses and trains to cars. Within a few years traffic "
        "returns to its previous level, but with more cars on the road in total. This effect, called induced "
        "demand, has been observed in many cities. The planners conclude that money is better spent on public "
        "transport, cycling routes and pricing schemes that make people think about when and how they travel.",
    ),
    (
        "summarize-07",
        "summarize",
        "Summarise the following product description in at most forty words.\n\n"
        "The Trailmate 40 is a hiking backpack designed for weekend trips. Its main compartment holds forty "
        "litres and opens from the top and from the front, so you can reach items at the bottom without "
        "unpacking everything. The back panel is made of a ventilated mesh that keeps air flowing between the "
        "pack and your back, and the hip belt has two zipped pockets for snacks and a phone. A rain cover is "
        "stored in a separate pocket at the base. The pack weighs 1.3 kilograms and comes in two back lengths.",
    ),
    (
        "summarize-08",
        "summarize",
        "Summarise this meeting transcript as a list of decisions and a list of open questions.\n\n"
        "Anna: We need to decide whether to move the release to next Thursday. Ben: The installer bug is fixed, "
        "but the documentation is still missing the upgrade section. Anna: Can we ship the docs a day later? "
        "Chen: Customers upgrade on release day, so the upgrade notes must be ready. Ben: Then let's release on "
        "Thursday and I will finish the upgrade section by Tuesday. Anna: Agreed. What about the translation of "
        "the new error messages? Chen: I have not heard back from the translators. Anna: Let's ask them today "
        "and decide on Monday whether to ship English-only messages.",
    ),
    (
        "summarize-09",
        "summarize",
        "Explain the main point of this paragraph in plain language, in two or three sentences.\n\n"
        "Caching stores the result of an expensive computation so that later requests for the same result can "
        "be served quickly. The difficulty lies in deciding when a cached value has become stale. If the "
        "underlying data changes and the cache is not updated, users may see outdated information. Common "
        "strategies include giving each entry a time to live, invalidating entries explicitly when the source "
        "changes, and versioning keys so that new data is written under a new name. Each strategy trades "
        "freshness against complexity and load on the original data source.",
    ),
    (
        "summarize-10",
        "summarize",
        "Write a headline and a two-sentence summary for this short news item.\n\n"
        "The regional railway company announced on Monday that the line between Northgate and Elmford will "
        "close for six weeks in July and August while engineers replace a ninety-year-old viaduct. Replacement "
        "buses will run every twenty minutes during the day and every hour in the evening. The company says the "
        "new viaduct will allow trains to cross at full speed, cutting the journey time by about four minutes. "
        "Local businesses have asked for the closure to be moved to the winter, when fewer tourists visit.",
    ),
    # ------------------------------------------------------------------ code: write or explain (Python, C, shell)
    (
        "code-01",
        "code",
        "Write a Python function that takes a list of integers and returns the length of the longest strictly "
        "increasing contiguous run. Include a docstring and three example calls with their expected results.",
    ),
    (
        "code-02",
        "code",
        "Explain what this Python code does, line by line, and point out any bug.\n\n"
        "```python\n"
        "def merge_counts(a, b):\n"
        "    result = a\n"
        "    for key, value in b.items():\n"
        "        result[key] = result.get(key, 0) + value\n"
        "    return result\n"
        "```",
    ),
    (
        "code-03",
        "code",
        "Write a C function `int is_palindrome(const char *s)` that returns 1 when the string reads the same "
        "forwards and backwards, ignoring case and any character that is not a letter or digit, and 0 "
        "otherwise. Do not allocate memory.",
    ),
    (
        "code-04",
        "code",
        "Explain what this C code prints and why.\n\n"
        "```c\n"
        "#include <stdio.h>\n"
        "int main(void) {\n"
        "    int a[4] = {1, 2, 3, 4};\n"
        "    int *p = a;\n"
        '    printf("%d\\n", *p++ + *++p);\n'
        "    return 0;\n"
        "}\n"
        "```",
    ),
    (
        "code-05",
        "code",
        "Write a POSIX shell script that finds every file ending in .log under a directory given as the first "
        "argument, compresses the ones older than seven days with gzip, and prints how many files it compressed. "
        "Handle file names with spaces.",
    ),
    (
        "code-06",
        "code",
        "Explain what this shell pipeline does and suggest a more robust version.\n\n"
        "```sh\n"
        "cat access.log | grep ' 404 ' | awk '{print $7}' | sort | uniq -c | sort -rn | head -10\n"
        "```",
    ),
    (
        "code-07",
        "code",
        "Write a Python class `RateLimiter` implementing a token bucket: the constructor takes a rate in tokens "
        "per second and a capacity, and a method `allow()` returns True when a request may proceed. Use "
        "time.monotonic and make it safe to call from several threads.",
    ),
    (
        "code-08",
        "code",
        "Write a Python function that parses a duration string such as '1h30m', '45s' or '2h5m10s' and returns "
        "the total number of seconds. Raise ValueError with a helpful message for malformed input.",
    ),
    (
        "code-09",
        "code",
        "Review this Python function and rewrite it to be clearer and faster.\n\n"
        "```python\n"
        "def find_duplicates(items):\n"
        "    dups = []\n"
        "    for i in range(len(items)):\n"
        "        for j in range(len(items)):\n"
        "            if i != j and items[i] == items[j] and items[i] not in dups:\n"
        "                dups.append(items[i])\n"
        "    return dups\n"
        "```",
    ),
    (
        "code-10",
        "code",
        "Write a C program that reads integers from standard input, one per line, and prints their count, "
        "minimum, maximum and mean. It must report an error for lines that are not valid integers and must not "
        "overflow when summing many large values.",
    ),
    (
        "code-11",
        "code",
        "Write a Bash function `retry` that runs a command up to N times with a delay that doubles after every "
        "failure, starting at one second, and returns the exit status of the last attempt. Show how to use it.",
    ),
    (
        "code-12",
        "code",
        "Explain the difference between a process and a thread, then write a short Python example that uses "
        "concurrent.futures to download three URLs in parallel and prints the size of each response.",
    ),
    (
        "code-13",
        "code",
        "Explain what this SQL query returns and how an index could make it faster.\n\n"
        "```sql\n"
        "SELECT customer_id, COUNT(*) AS orders, SUM(total) AS spent\n"
        "FROM orders\n"
        "WHERE created_at >= '2024-01-01'\n"
        "GROUP BY customer_id\n"
        "HAVING COUNT(*) > 5\n"
        "ORDER BY spent DESC;\n"
        "```",
    ),
    # ------------------------------------------------------------------ structured output (JSON, YAML, tables)
    (
        "structured-01",
        "structured",
        "Return a JSON object describing three fictional books, each with the keys title, author, year, genre and a list of two themes. Output only the JSON.",
    ),
    (
        "structured-02",
        "structured",
        "Convert this information into YAML with a top-level key `servers`, one entry per server with name, "
        "address, role and a list of open ports.\n\n"
        "web-1 is at 10.0.0.11 and serves HTTP on ports 80 and 443. web-2 is at 10.0.0.12 with the same ports. "
        "db-1 is the database at 10.0.0.21 listening on 5432. cache-1 at 10.0.0.31 runs a cache on 6379.",
    ),
    (
        "structured-03",
        "structured",
        "Make a Markdown table comparing bicycles, electric scooters, buses and cars for a five-kilometre city "
        "commute. Columns: cost per trip, time, exercise, weather sensitivity and carbon emissions.",
    ),
    (
        "structured-04",
        "structured",
        "Extract every date, person and place from the text below and return them as JSON with the keys dates, "
        "people and places.\n\n"
        "On 3 March 2021 Maria Lopez flew from Lisbon to Oslo to meet her colleague Jonas Berg. They spent two "
        "days visiting the fjords near Bergen and returned to Oslo on 6 March, where they met Dr. Ahmed Khan at "
        "the university.",
    ),
    (
        "structured-05",
        "structured",
        "Write a JSON Schema (draft 2020-12) for a user profile object with a required string `username` of 3 "
        "to 20 characters, a required `email` in email format, an optional integer `age` of at least 13, and an "
        "optional array `interests` of unique strings.",
    ),
    (
        "structured-06",
        "structured",
        "Create a weekly meal plan for a vegetarian family of four as a Markdown table with one row per day and "
        "columns for breakfast, lunch and dinner. Add a shopping list below the table grouped by category.",
    ),
    (
        "structured-07",
        "structured",
        "Turn these release notes into a YAML changelog with the keys version, date, added, changed and fixed, "
        "each of the last three being a list of strings.\n\n"
        "Version 2.4.0, released 12 May. We added export to CSV and a dark theme. Search is now twice as fast "
        "and the settings page was reorganised. We fixed a crash when opening empty files and a bug where the "
        "window size was not remembered.",
    ),
    (
        "structured-08",
        "structured",
        "Produce a CSV file with a header row listing the eight planets of the solar system with their order "
        "from the Sun, whether they are rocky or gaseous, and their approximate number of known moons.",
    ),
    (
        "structured-09",
        "structured",
        "Design a REST API for a small library system. Return the list of endpoints as a JSON array where each "
        "element has method, path, description and an example request body (or null).",
    ),
    (
        "structured-10",
        "structured",
        "Write an Ansible-style YAML inventory for two groups, `edge` with three hosts named edge-01 to edge-03 "
        "and `core` with two hosts named core-01 and core-02, setting ansible_user to admin for every host and "
        "a variable `region: north` for the edge group only.",
    ),
    (
        "structured-11",
        "structured",
        "Classify each of the following customer messages as praise, complaint, question or other, and return "
        "a JSON array of objects with the keys message and label.\n\n"
        "1. The delivery arrived two days late and the box was damaged.\n"
        "2. Do you ship to Canada?\n"
        "3. Fantastic service, thank you so much!\n"
        "4. I changed my address last week.\n"
        "5. Why was I charged twice for the same order?",
    ),
    # ------------------------------------------------------------------ translation
    (
        "translate-01",
        "translate",
        "Translate into French:\n\n"
        "The museum will be closed on Monday for maintenance. Tickets bought for that day can be used on any "
        "other day this month, and visitors who prefer a refund can ask at the front desk.",
    ),
    (
        "translate-02",
        "translate",
        "Translate into Spanish, keeping a friendly tone:\n\n"
        "Thanks for joining our cooking class! Please bring an apron and a container for leftovers. We will "
        "start with a simple tomato sauce and finish with a fruit tart.",
    ),
    (
        "translate-03",
        "translate",
        "Translate into German:\n\n"
        "To reset your password, open the settings page, choose Security and click the button labelled Reset "
        "password. You will receive an email with a link that is valid for one hour.",
    ),
    (
        "translate-04",
        "translate",
        "Translate the following French text into English:\n\n"
        "Le marché du village a lieu tous les samedis matin sur la place de l'église. On y trouve des légumes "
        "de saison, du fromage de chèvre et du pain cuit au feu de bois. En été, des musiciens jouent souvent "
        "près de la fontaine.",
    ),
    (
        "translate-05",
        "translate",
        "Translate into Italian and then back into English, and comment on any meaning that changed:\n\n"
        "The early bird catches the worm, but the second mouse gets the cheese.",
    ),
    (
        "translate-06",
        "translate",
        "Translate this Spanish paragraph into English:\n\n"
        "El proyecto comenzó como una pequeña biblioteca para leer sensores de temperatura. Con el tiempo, la "
        "comunidad añadió soporte para humedad, presión y calidad del aire, y hoy se usa en estaciones "
        "meteorológicas escolares de varios países.",
    ),
    (
        "translate-07",
        "translate",
        "Translate into Portuguese, using formal language suitable for a business letter:\n\n"
        "We are pleased to confirm your order of two hundred units. The goods will be shipped within ten "
        "working days, and the invoice will follow by post.",
    ),
    (
        "translate-08",
        "translate",
        "Translate into simple English for a language learner, explaining any idiom you replace:\n\n"
        "After burning the midnight oil for weeks, she finally hit the nail on the head with her proposal, and "
        "the board gave it the green light.",
    ),
    (
        "translate-09",
        "translate",
        "Translate these user interface strings into Dutch and return them as a JSON object with the same "
        "keys:\n\n"
        '{"save": "Save changes", "cancel": "Cancel", "delete_confirm": "Do you really want to delete this '
        'file?", "offline": "You are offline. Changes will be synced later."}',
    ),
    # ------------------------------------------------------------------ rewriting
    (
        "rewrite-01",
        "rewrite",
        "Rewrite this email to be polite and concise:\n\n"
        "hey, i still havent got the report you promised last week. i need it for the meeting tomorrow so send "
        "it asap or i will have to tell the boss that we are late again because of you.",
    ),
    (
        "rewrite-02",
        "rewrite",
        "Rewrite the following paragraph in the passive voice where it makes sense, and explain when the "
        "passive voice is a good choice.\n\n"
        "The committee reviewed the proposal on Friday. The members asked several questions about the budget. "
        "The chair postponed the vote until the finance team provides new figures.",
    ),
    (
        "rewrite-03",
        "rewrite",
        "Rewrite this technical explanation for a ten-year-old:\n\n"
        "A solar panel contains cells made of silicon. When sunlight hits a cell, it knocks electrons loose "
        "from their atoms, and the structure of the cell pushes those electrons in one direction, creating an "
        "electric current that can power devices or charge a battery.",
    ),
    (
        "rewrite-04",
        "rewrite",
        "Make this product description more vivid and persuasive without adding false claims:\n\n"
        "This mug holds 350 ml. It is made of ceramic. It can go in the dishwasher. It comes in blue and grey.",
    ),
    (
        "rewrite-05",
        "rewrite",
        "Shorten this paragraph to half its length while keeping every important fact:\n\n"
        "Our office will be moving to a new building on the other side of the river at the end of next month. "
        "The new building is closer to the train station, which should make commuting easier for many of you. "
        "During the move, which will take place over the weekend of the 28th, the IT team will transfer all "
        "computers and phones, so please make sure your desk is cleared by Friday afternoon. Parking at the new "
        "site is limited, so we encourage everyone to use public transport or to cycle.",
    ),
    (
        "rewrite-06",
        "rewrite",
        "Rewrite these bullet notes as a well-structured paragraph for a project status report:\n\n"
        "- prototype done, tested with 5 users\n"
        "- users liked search, found settings confusing\n"
        "- battery use too high on older phones\n"
        "- next: redesign settings, profile power use\n"
        "- release slips two weeks",
    ),
    (
        "rewrite-07",
        "rewrite",
        "Correct the grammar and spelling in this text and list the changes you made:\n\n"
        "Their going to the libary tomorow to return there books, but they dont know weather it will be open "
        "because of the holliday.",
    ),
    (
        "rewrite-08",
        "rewrite",
        "Rewrite this error message so that a non-technical user understands what happened and what to do:\n\n"
        "ERR_CONN_REFUSED: upstream 10.0.3.7:8443 unreachable (ECONNREFUSED) after 3 retries; request aborted.",
    ),
    (
        "rewrite-09",
        "rewrite",
        "Turn this dry instruction into a short, friendly message for a shared office kitchen:\n\n"
        "Users of the kitchen must wash and dry their dishes immediately after use. Food left in the "
        "refrigerator after Friday at 17:00 will be discarded.",
    ),
    (
        "rewrite-10",
        "rewrite",
        "Rewrite the following paragraph in a formal academic style:\n\n"
        "Lots of people think video games are bad for kids, but a bunch of studies show that some games can "
        "actually help with things like problem solving and teamwork, as long as kids also sleep enough and "
        "play outside.",
    ),
    (
        "rewrite-11",
        "rewrite",
        "Write three alternative titles for a blog post with this opening sentence, one serious, one playful "
        "and one as a question:\n\n"
        "Most home networks are slower than they need to be, and the fix is often a five-minute change to where "
        "the router sits.",
    ),
)


def _build(pid, kind, text):
    return {
        "id": pid,
        "kind": kind,
        "messages": [{"role": "user", "content": text}],
        "prompt": COMPLETION_TEMPLATE % text,
    }


PROMPTS = tuple(_build(pid, kind, text) for pid, kind, text in _RAW)


def by_id(prompt_id):
    """Return the prompt with this id (``KeyError`` when unknown)."""
    for item in PROMPTS:
        if item["id"] == prompt_id:
            return item
    raise KeyError(prompt_id)


def order(seed, prompts=None):
    """Return the ids of every prompt in a seed-determined order (the same on every Python >= 3.8).

    ``prompts`` is the set to order (a user's set from ``parse_prompts_file``); default ``PROMPTS``.
    """
    ids = [item["id"] for item in (PROMPTS if prompts is None else prompts)]
    rng = random.Random("jetson_llm.speculative/prompts/%d" % int(seed))
    rng.shuffle(ids)
    return ids


def select(count, seed=0, offset=0, prompts=None):
    """Return ``count`` prompts in a deterministic order for ``seed``.

    The set is shuffled once per seed and read from position ``offset``; when more prompts are
    needed than the set holds, reading wraps around (prompts repeat in the same order). A
    benchmark takes its measured prompts at offset 0 and its warm-up prompts after them, so the
    two do not overlap while ``num_prompts + num_warmups`` does not exceed the set size.

    ``prompts`` is the set to read (a user's set from ``parse_prompts_file``); default ``PROMPTS``.
    The same seed and offset give the same prompts, so both arms of a comparison see the same ones.
    """
    count = int(count)
    if count < 0:
        raise ValueError("count must be >= 0, got %d" % count)
    prompts = PROMPTS if prompts is None else prompts
    if not prompts:
        raise ValueError("the prompt set is empty")
    ids = order(seed, prompts)
    index = dict((item["id"], item) for item in prompts)
    return [index[ids[(offset + i) % len(ids)]] for i in range(count)]


# ---------------------------------------------------------------- the user's own prompts
# A JSONL file with one prompt per line, in the shape of the custom datasets of ``vllm bench serve``:
# ``{"prompt": "..."}`` (sent as is to /v1/completions, as the only user message to
# /v1/chat/completions) or ``{"messages": [...]}`` (OpenAI chat messages, /v1/chat/completions only).
# Other keys of a line are ignored, as ``vllm bench serve`` does, so its datasets can be reused.
# The controller checks the file with parse_prompts_file() before any device is touched; the module
# parses the copy on the device with the same function.

MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_PROMPTS = 10000
MESSAGE_ROLES = ("system", "developer", "user", "assistant")
# Control characters other than tab, line feed and carriage return, inside the prompt text.
_BAD_CHARS_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")

PROMPTS_FILE_FORMAT = (
    "a UTF-8 JSONL file of at most %d prompts and %d MiB, one JSON object per line (blank lines are skipped) "
    'with either "prompt": a non-empty string, or "messages": a non-empty list of chat messages '
    '{"role": one of %s, "content": a string or a list of {"type": "text", "text": a string}}, '
    "with text of at least one character and no control characters other than tab and line breaks"
) % (MAX_PROMPTS, MAX_FILE_BYTES // (1024 * 1024), ", ".join(MESSAGE_ROLES))


class PromptsFileError(ValueError):
    """A prompts file that is not allowed; ``line`` is the 1-based line number, or None for the whole file."""

    def __init__(self, problem, line=None):
        super(PromptsFileError, self).__init__(problem if line is None else "line %d: %s" % (line, problem))
        self.problem = problem
        self.line = line


def _text_problem(text, what):
    if not isinstance(text, str):
        return "%s must be a string, got %s" % (what, type(text).__name__)
    if not text.strip():
        return "%s is empty" % what
    bad = _BAD_CHARS_RE.search(text)
    if bad:
        return "%s holds the control character %r (only tab and line breaks are allowed)" % (what, bad.group(0))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "%s holds a lone surrogate (\\ud800-\\udfff escape), which is not text" % what
    return None


def _content(content, where):
    """The text of a message's content (a string or a list of text parts), or raise ValueError."""
    if isinstance(content, list):
        if not content:
            raise ValueError("%s.content is an empty list" % where)
        for index, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or "text" not in part:
                raise ValueError('%s.content[%d] must be {"type": "text", "text": ...} (only text parts are allowed)' % (where, index))
            problem = _text_problem(part["text"], "%s.content[%d].text" % (where, index))
            if problem:
                raise ValueError(problem)
        return content
    problem = _text_problem(content, "%s.content" % where)
    if problem:
        raise ValueError(problem)
    return content


def _parse_line(obj):
    """The prompt of one JSON value: ``(messages, prompt)`` with ``prompt`` None for chat-only lines."""
    if not isinstance(obj, dict):
        raise ValueError("expected a JSON object, got %s" % type(obj).__name__)
    has_prompt, has_messages = "prompt" in obj, "messages" in obj
    if has_prompt == has_messages:
        raise ValueError('expected exactly one of the keys "prompt" and "messages", found %s' % ("both" if has_prompt else "neither"))
    if has_prompt:
        problem = _text_problem(obj["prompt"], "prompt")
        if problem:
            raise ValueError(problem)
        return [{"role": "user", "content": obj["prompt"]}], obj["prompt"]
    messages = obj["messages"]
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list of chat messages")
    clean = []
    for index, message in enumerate(messages):
        where = "messages[%d]" % index
        if not isinstance(message, dict):
            raise ValueError("%s must be an object with role and content" % where)
        unknown = sorted(set(message) - set(("role", "content", "name")))
        if unknown:
            raise ValueError("%s has the key %r; allowed are role, content, name" % (where, unknown[0]))
        if message.get("role") not in MESSAGE_ROLES:
            raise ValueError("%s.role must be one of %s, got %r" % (where, ", ".join(MESSAGE_ROLES), message.get("role")))
        if "content" not in message:
            raise ValueError("%s has no content" % where)
        item = {"role": message["role"], "content": _content(message["content"], where)}
        if "name" in message:
            problem = _text_problem(message["name"], "%s.name" % where)
            if problem:
                raise ValueError(problem)
            item["name"] = message["name"]
        clean.append(item)
    return clean, None


def parse_prompts_file(data):
    """Parse the bytes of a prompts file; return ``(prompts, info)`` or raise ``PromptsFileError``.

    Each prompt has the shape of ``PROMPTS``: ``id`` (``line-N``, its line number), ``kind``
    (``prompt`` or ``messages``), ``messages`` and ``prompt`` (None for a ``messages`` line: such a
    line can only be sent to /v1/chat/completions). ``info`` is ``{"count", "sha256", "kinds"}``.
    """
    if len(data) > MAX_FILE_BYTES:
        raise PromptsFileError("the file has %d bytes, more than the limit of %d (16 MiB)" % (len(data), MAX_FILE_BYTES))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise PromptsFileError("not UTF-8 text (byte %d of the file)" % exc.start, line) from None
    prompts = []
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        if len(prompts) >= MAX_PROMPTS:
            raise PromptsFileError("more than %d prompts" % MAX_PROMPTS, number)
        try:
            obj = json.loads(line)
        except ValueError as exc:
            detail = "%s at column %d" % (exc.msg, exc.colno) if hasattr(exc, "colno") else str(exc)
            raise PromptsFileError("not JSON (%s)" % detail, number) from None
        try:
            messages, prompt = _parse_line(obj)
        except ValueError as exc:
            raise PromptsFileError(str(exc), number) from None
        prompts.append({"id": "line-%d" % number, "kind": "prompt" if prompt is not None else "messages", "messages": messages, "prompt": prompt})
    if not prompts:
        raise PromptsFileError("the file holds no prompt")
    info = {
        "count": len(prompts),
        "sha256": hashlib.sha256(data).hexdigest(),
        "kinds": sorted(set(p["kind"] for p in prompts)),
    }
    return prompts, info


def read_prompts_file(path):
    """Read and parse a prompts file (``parse_prompts_file``); never reads more than the size limit."""
    with open(path, "rb") as handle:
        data = handle.read(MAX_FILE_BYTES + 1)
    return parse_prompts_file(data)
