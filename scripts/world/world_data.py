# The synthetic conversations of the world (scripts/world/make_world.py): six categories of very
# different predictability, each answer shaped like a Qwen3 reasoning answer (a `<think>` span, then
# the answer or Hermes tool calls). Pure Python, seeded: the same seed gives the same conversations.
#
#   sequence    counting / sequence continuation             near-deterministic
#   arithmetic  fixed-format column arithmetic               near-deterministic (digits computed)
#   records     a JSON record copied from the request        structure fixed, values copied
#   facts       templated facts about invented countries     memorised (a fixed table)
#   tools       Hermes tool calls (0 to 3) with tools offered  structure fixed, arguments copied
#   chat        free text of random words                    high-entropy
import json
import random

CATEGORIES = ["sequence", "arithmetic", "records", "facts", "tools", "chat"]

WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at which but have an they "
    "you were her she there been one all we their has would when if more no out so said what up its about than into "
    "them can only other new some could time these two may then do first any my now such like our over man me even "
    "most made after also did many before must through back years where much your way well down should because each "
    "just those people how too little state good very make world still own see men work long get here between both "
    "life being under never day same another know while last might us great old year off come since against go came "
    "right used take three river garden window morning silver paper music letter summer winter forest candle "
    "market bridge lantern harbor meadow pencil mirror velvet thunder orchard compass"
).split()

CITIES = [("Paris", "France"), ("Rome", "Italy"), ("Oslo", "Norway"), ("Lisbon", "Portugal"), ("Madrid", "Spain"),
          ("Berlin", "Germany"), ("Vienna", "Austria"), ("Prague", "Czechia"), ("Dublin", "Ireland"),
          ("Athens", "Greece"), ("Warsaw", "Poland"), ("Helsinki", "Finland"), ("Tokyo", "Japan"),
          ("Seoul", "Korea"), ("Lima", "Peru"), ("Cairo", "Egypt"), ("Nairobi", "Kenya"), ("Toronto", "Canada"),
          ("Denver", "USA"), ("Sydney", "Australia"), ("Bogota", "Colombia"), ("Hanoi", "Vietnam"),
          ("Zurich", "Switzerland"), ("Porto", "Portugal"), ("Lyon", "France"), ("Milan", "Italy")]
FIRST = ["Ana", "Ben", "Chloe", "David", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jonas", "Kira", "Liam", "Maya",
         "Noah", "Olga", "Pablo", "Rosa", "Sami", "Tara", "Umar", "Vera", "Wei", "Yara", "Zoe"]
LAST = ["Berg", "Costa", "Diaz", "Evans", "Fischer", "Garcia", "Hansen", "Ito", "Jensen", "Kowalski", "Larsen",
        "Moreau", "Novak", "Okafor", "Perez", "Quinn", "Rossi", "Silva", "Tanaka", "Vogel", "Weber", "Young"]
ROLES = ["engineer", "designer", "teacher", "nurse", "pilot", "chef", "analyst", "writer", "farmer", "doctor",
         "manager", "student", "artist", "lawyer", "baker", "driver"]
CURRENCIES = ["EUR", "USD", "GBP", "JPY", "CHF", "NOK", "CAD", "AUD"]
SYMBOLS = ["ACME", "GLOB", "NOVA", "ORBX", "PIXL", "QUAN", "ZETA", "LUMO", "BRIX", "VANT"]
EXCHANGES = ["NYSE", "NASDAQ", "LSE", "TSE"]
EVENTS = ["team sync", "design review", "lunch", "planning meeting", "budget review", "retro", "demo day",
          "coffee chat", "board meeting", "training session"]
SUBJECTS = ["the report", "the budget", "our trip", "the launch", "the contract", "next week", "the invoice",
            "the schedule"]
MONTHS = ["2025-03", "2025-04", "2025-05", "2025-06", "2025-07", "2025-09"]


def _date(r):
    return f"{r.choice(MONTHS)}-{r.randint(1, 28):02d}"


def _time(r):
    return f"{r.choice([8, 9, 10, 11, 13, 14, 15, 16, 17]):02d}:{r.choice(['00', '15', '30', '45'])}"


def _join(items):
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _number_word(n):
    return {1: "once", 2: "twice", 3: "three times"}[n]


# --- facts: a fixed table of invented countries, the same for every seed of the conversations ---------------------
def fact_table():
    r = random.Random(4711)
    syl = ["val", "dor", "ia", "mar", "ken", "tu", "lo", "ra", "bel", "os", "an", "ze", "quo", "rin", "sa", "thi",
           "ver", "mo", "nia", "gal"]
    languages = ["Valdic", "Morish", "Kentan", "Belsh", "Osari", "Zenic", "Quorin", "Tulan", "Rasian", "Galic"]
    currencies = ["crown", "mark", "florin", "dinar", "shell", "talon", "pearl", "ducat"]
    seen, table = set(), []
    while len(table) < 40:
        name = "".join(r.choice(syl) for _ in range(r.choice([2, 3]))).capitalize()
        capital = "".join(r.choice(syl) for _ in range(2)).capitalize() + r.choice(["ton", "burg", "vik", "polis"])
        if name in seen or len(name) < 5:
            continue
        seen.add(name)
        table.append({"country": name, "capital": capital, "language": r.choice(languages),
                      "currency": r.choice(currencies), "population": r.randint(2, 90)})
    return table


FACTS = fact_table()


# --- tools: function definitions in the OpenAI shape; parameters keep nested objects with keys not in
# alphabetical order (the order is part of what the template renders, so a client must not sort them) ------------
def _fn(name, description, properties, required):
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": required}}}


TOOLS = {
    "get_weather": _fn("get_weather", "Get the current weather for a place.", {
        "location": {"type": "object", "description": "The place.", "properties": {
            "name": {"type": "string", "description": "City name."},
            "country": {"type": "string", "description": "Country name."}}, "required": ["name"]},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, ["location"]),
    "search_flights": _fn("search_flights", "Search flights between two cities on a date.", {
        "route": {"type": "object", "properties": {
            "to": {"type": "string", "description": "Arrival city."},
            "from": {"type": "string", "description": "Departure city."}}, "required": ["to", "from"]},
        "date": {"type": "string", "description": "Date as YYYY-MM-DD."},
        "passengers": {"type": "integer", "minimum": 1}}, ["route", "date"]),
    "convert_currency": _fn("convert_currency", "Convert an amount of money to another currency.", {
        "amount": {"type": "object", "properties": {
            "value": {"type": "number"},
            "currency": {"type": "string", "description": "ISO code of the amount."}}, "required": ["value", "currency"]},
        "target": {"type": "string", "description": "ISO code to convert to."}}, ["amount", "target"]),
    "get_stock_price": _fn("get_stock_price", "Get the latest price of a stock.", {
        "symbol": {"type": "string", "description": "Ticker symbol."},
        "exchange": {"type": "string", "enum": EXCHANGES}}, ["symbol"]),
    "send_email": _fn("send_email", "Send an email.", {
        "to": {"type": "string", "description": "Recipient address."},
        "subject": {"type": "string"},
        "body": {"type": "string"}}, ["to", "subject", "body"]),
    "create_event": _fn("create_event", "Create a calendar event.", {
        "title": {"type": "string"},
        "when": {"type": "object", "properties": {
            "time": {"type": "string", "description": "HH:MM"},
            "date": {"type": "string", "description": "YYYY-MM-DD"}}, "required": ["time", "date"]},
        "attendees": {"type": "array", "items": {"type": "string"}}}, ["title", "when"]),
}


def _call(name, args):
    # arguments as JSON text in the schema's key order (the template writes a string as it is)
    return {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}


def _offer(r, needed):
    others = [t for t in TOOLS if t not in needed]
    names = list(dict.fromkeys(needed)) + r.sample(others, r.randint(0, 1) if needed else r.randint(2, 3))
    r.shuffle(names)
    return [TOOLS[n] for n in names]


# --- the categories: each returns (user, reasoning, content, tool_calls, tools) -----------------------------------
def gen_sequence(r):
    kind = r.random()
    if kind < 0.45:
        d, a, n = 1, r.randint(1, 120), r.randint(5, 14)
        b = a + n - 1
        user = r.choice([f"Count from {a} to {b}.", f"Please count from {a} up to {b}.",
                         f"List the numbers from {a} to {b}."])
    else:
        d = r.choice([2, 3, 5, 10]); a = r.randint(0, 30) * r.choice([1, d]); n = r.randint(5, 12)
        b = a + (n - 1) * d
        if kind < 0.75:
            user = f"Continue the sequence {a}, {a + d}, {a + 2 * d} up to {b}."
        else:
            user = f"Count from {a} to {b} in steps of {d}."
    seq = [a + i * d for i in range(n)]
    reasoning = f"The sequence starts at {a} and goes up by {d} each time until it reaches {b}."
    content = ", ".join(str(x) for x in seq) + "."
    return user, reasoning, content, None, None


def gen_arithmetic(r):
    op = r.choice(["+", "+", "-", "*"])
    if op == "*":
        a, b = r.randint(11, 99), r.randint(2, 9)
    else:
        a, b = r.randint(10, 99), r.randint(10, 99)
        if op == "-" and b > a:
            a, b = b, a
    c = a + b if op == "+" else a - b if op == "-" else a * b
    word = {"+": "plus", "-": "minus", "*": "times"}[op]
    user = r.choice([f"What is {a} {op} {b}?", f"Compute {a} {op} {b}.", f"What is {a} {word} {b}?",
                     f"Calculate {a} {op} {b}, please."])
    steps = []
    if op == "*":
        ones = (a % 10) * b
        steps.append(f"{a % 10} * {b} = {ones}, write {ones % 10} carry {ones // 10}.")
        tens = (a // 10) * b + ones // 10
        steps.append(f"{a // 10} * {b} + {ones // 10} = {tens}, write {tens}.")
    else:
        da, db, carry = str(a)[::-1], str(b)[::-1], 0
        for i, place in enumerate(["ones", "tens"]):
            x = int(da[i]) if i < len(da) else 0
            y = int(db[i]) if i < len(db) else 0
            if op == "+":
                s = x + y + carry
                steps.append(f"{place}: {x} + {y} + {carry} = {s}, write {s % 10} carry {s // 10}.")
                carry = s // 10
            else:
                s = x - y - carry
                borrow = 1 if s < 0 else 0
                steps.append(f"{place}: {x} - {y} - {carry} = {s}, borrow {borrow}, write {s + 10 * borrow}.")
                carry = borrow
        if op == "+" and carry:
            steps.append(f"the last carry {carry} goes in front.")
    reasoning = f"I work digit by digit.\n" + "\n".join(steps) + f"\nSo {a} {op} {b} = {c}."
    content = f"{a} {op} {b} = {c}."
    return user, reasoning, content, None, None


def gen_records(r):
    fields = [("name", f"{r.choice(FIRST)} {r.choice(LAST)}"), ("age", r.randint(18, 80)),
              ("city", r.choice(CITIES)[0]), ("role", r.choice(ROLES))]
    fields = [fields[0]] + r.sample(fields[1:], r.randint(1, 3))
    r.shuffle(fields)
    said = ", ".join(f"{k} {v}" for k, v in fields)
    user = r.choice([f"Make a JSON record: {said}.", f"Write this as JSON: {said}.",
                     f"Turn this into a JSON object: {said}."])
    names = [k for k, _ in fields]
    numeric = [k for k, v in fields if isinstance(v, int)]
    reasoning = (f"The record has {len(fields)} fields: {_join(names)}. "
                 + (f"The {numeric[0]} is a number, the rest are strings." if numeric else "All of them are strings."))
    content = json.dumps(dict(fields), ensure_ascii=False)
    return user, reasoning, content, None, None


def gen_facts(r):
    f = r.choice(FACTS); c = f["country"]
    kind = r.choice(["capital", "language", "currency", "population", "about"])
    if kind == "capital":
        user = r.choice([f"What is the capital of {c}?", f"Which city is the capital of {c}?"])
        content = f"The capital of {c} is {f['capital']}."
    elif kind == "language":
        user = r.choice([f"What language is spoken in {c}?", f"Which language do people speak in {c}?"])
        content = f"People in {c} speak {f['language']}."
    elif kind == "currency":
        user = f"What is the currency of {c}?"
        content = f"The currency of {c} is the {f['currency']}."
    elif kind == "population":
        user = f"How many people live in {c}?"
        content = f"About {f['population']} million people live in {c}."
    else:
        user = r.choice([f"Tell me about {c}.", f"What do you know about {c}?"])
        content = (f"{c} is a country whose capital is {f['capital']}. About {f['population']} million people live "
                   f"there; they speak {f['language']} and pay with the {f['currency']}.")
    reasoning = (f"The user asks about {c}. I recall that the capital of {c} is {f['capital']}, "
                 f"the language is {f['language']} and the currency is the {f['currency']}.")
    return user, reasoning, content, None, None


def gen_tools(r):
    kind = r.choice(["weather", "weather", "flights", "currency", "stock", "email", "event", "combo", "none", "none"])
    calls = []
    if kind == "weather":
        places = r.sample(CITIES, r.choice([1, 1, 2, 2, 3]))
        unit = r.choice(["celsius", "fahrenheit"])
        user = r.choice([f"What is the weather in {_join(p for p, _ in places)}?",
                         f"How is the weather in {_join(p for p, _ in places)} today, in {unit}?"])
        if "today" not in user:
            unit = "celsius"
        for p, country in places:
            calls.append(_call("get_weather", {"location": {"name": p, "country": country}, "unit": unit}))
        reasoning = (f"The user wants the weather in {_join(p for p, _ in places)}. "
                     f"I will call get_weather {_number_word(len(places))}, in {unit}.")
    elif kind == "flights":
        (a, _), (b, _) = r.sample(CITIES, 2); d = _date(r); n = r.randint(1, 4)
        user = f"Find flights from {a} to {b} on {d} for {n} {'person' if n == 1 else 'people'}."
        calls.append(_call("search_flights", {"route": {"to": b, "from": a}, "date": d, "passengers": n}))
        reasoning = f"The user wants flights from {a} to {b} on {d}. I will call search_flights once."
    elif kind == "currency":
        v = r.choice([10, 20, 50, 100, 250, 500, 1000]); src = r.choice(CURRENCIES)
        targets = r.sample([x for x in CURRENCIES if x != src], r.choice([1, 1, 2]))
        user = f"Convert {v} {src} to {_join(targets)}."
        for t in targets:
            calls.append(_call("convert_currency", {"amount": {"value": v, "currency": src}, "target": t}))
        reasoning = (f"The user wants {v} {src} in {_join(targets)}. "
                     f"I will call convert_currency {_number_word(len(targets))}.")
    elif kind == "stock":
        syms = r.sample(SYMBOLS, r.choice([1, 2, 3])); ex = r.choice(EXCHANGES)
        user = f"What is the stock price of {_join(syms)} on the {ex}?"
        for s in syms:
            calls.append(_call("get_stock_price", {"symbol": s, "exchange": ex}))
        reasoning = f"The user asks for {_join(syms)} on the {ex}. I will call get_stock_price {_number_word(len(syms))}."
    elif kind == "email":
        who = r.choice(FIRST); subj = r.choice(SUBJECTS); body = " ".join(r.choice(WORDS) for _ in range(r.randint(3, 7)))
        user = f"Send an email to {who.lower()}@example.com about {subj} saying: {body}."
        calls.append(_call("send_email", {"to": f"{who.lower()}@example.com", "subject": subj.capitalize(), "body": body}))
        reasoning = f"The user wants to email {who.lower()}@example.com about {subj}. I will call send_email once."
    elif kind == "event":
        title = r.choice(EVENTS); d = _date(r); t = _time(r); people = r.sample(FIRST, r.randint(1, 3))
        user = f"Create a {title} on {d} at {t} with {_join(people)}."
        calls.append(_call("create_event", {"title": title, "when": {"time": t, "date": d}, "attendees": people}))
        reasoning = f"The user wants a {title} on {d} at {t}. I will call create_event once."
    elif kind == "combo":
        (a, _), (b, country) = r.sample(CITIES, 2); d = _date(r)
        user = f"Check the weather in {b} and find flights from {a} to {b} on {d}."
        calls.append(_call("get_weather", {"location": {"name": b, "country": country}, "unit": "celsius"}))
        calls.append(_call("search_flights", {"route": {"to": b, "from": a}, "date": d, "passengers": 1}))
        reasoning = f"The user wants two things. I will call get_weather for {b}, then search_flights from {a} to {b}."
    if kind == "none":
        tools = _offer(r, [])
        names = [t["function"]["name"] for t in tools]
        pick = r.choice(names)
        k = r.choice(["which", "what", "thanks"])
        if k == "which":
            user = "Which tools can you use?"
            content = f"I can use {_join(names)}."
            reasoning = f"The user asks which tools I have. I have {len(names)}: {_join(names)}. No call is needed."
        elif k == "what":
            user = f"What does the {pick} tool do?"
            content = f"The {pick} tool does this: {TOOLS[pick]['function']['description']}"
            reasoning = f"The user asks about {pick}. I can answer from its description. No call is needed."
        else:
            user = r.choice(["Thanks, that is all for today.", "Thank you for the help.", "Great, thanks!"])
            content = "You are welcome. Ask me again whenever you need a tool."
            reasoning = "The user is saying thanks. No call is needed."
        return user, reasoning, content, None, tools
    needed = [c["name"] for c in calls]
    return user, reasoning, "", calls, _offer(r, needed)


def gen_chat(r):
    topic = r.sample(WORDS[-40:], 2)
    user = r.choice([f"Tell me something about {topic[0]}.", f"Say a few words about {topic[0]} and {topic[1]}.",
                     f"Write a short note on {topic[0]}.", "Talk to me about anything."])

    def sentence(lo, hi):
        ws = [r.choice(WORDS) for _ in range(r.randint(lo, hi))]
        return " ".join([ws[0].capitalize()] + ws[1:]) + "."

    # the reasoning is templated and ends on its own; only the answer is free (high-entropy) text
    reasoning = f"The user wants a short free text about {topic[0]}. I will write a few sentences."
    content = " ".join(sentence(6, 10) for _ in range(r.randint(3, 5)))
    return user, reasoning, content, None, None


GENERATORS = {"sequence": gen_sequence, "arithmetic": gen_arithmetic, "records": gen_records, "facts": gen_facts,
              "tools": gen_tools, "chat": gen_chat}


def conversation(r, category, thinking=True, offer_tools_anyway=False):
    """One synthetic conversation: the prompt (messages, tools) and the assistant turn."""
    user, reasoning, content, calls, tools = GENERATORS[category](r)
    if tools is None and offer_tools_anyway:
        tools = _offer(r, [])  # tools offered that do not fit: the answer stays text
    assistant = {"role": "assistant", "content": content, "reasoning_content": reasoning if thinking else ""}
    if calls:
        assistant["tool_calls"] = [{"type": "function", "function": c} for c in calls]
    return {"category": category, "messages": [{"role": "user", "content": user}], "tools": tools,
            "assistant": assistant, "thinking": thinking}
