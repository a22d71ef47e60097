// Generated traces reach TLC through this class instead of a TLA+ constant module.
//
// TLC 2.15 looks up the class tlc2.overrides.TLCOverrides on its classpath and lets each
// method annotated with @TLAPlusOperator replace the TLA+ operator it names. SANY needs
// seconds per megabyte to parse and level-check a trace written as a TLA+ literal (a
// 2.9 MB batch: 3.4 s parsing, 5.7 s semantic processing); this reader builds the same
// values directly. tracecheck compiles it on first use (tracecheck/replay/javareader.py) and
// falls back to the TLA+ constant module where no Java compiler is found. The same class
// computes the operators of the generated module TraceOps natively (see below).
package tlc2.overrides;

import java.io.IOException;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

import tlc2.module.TLC;
import tlc2.output.EC;
import tlc2.tool.EvalException;
import tlc2.value.impl.BoolValue;
import tlc2.value.impl.FcnRcdValue;
import tlc2.value.impl.IntValue;
import tlc2.value.impl.ModelValue;
import tlc2.value.impl.RecordValue;
import tlc2.value.impl.SetEnumValue;
import tlc2.value.impl.StringValue;
import tlc2.value.impl.TupleValue;
import tlc2.value.impl.Value;
import tlc2.value.impl.ValueVec;
import util.UniqueString;

public class TLCOverrides implements ITLCOverrides {

    @SuppressWarnings("rawtypes")
    @Override
    public Class[] get() {
        return new Class[] { TLCOverrides.class };
    }

    /**
     * TraceIO!TVRead(path): the file's traces as a tuple of tuples of events. The file holds
     * one line "#" before each trace and then one event per line, each a TLA+ value in the
     * syntax tracecheck's format_value writes (strings, integers, booleans, model values,
     * tuples, sets, records, functions as (k :> v @@ ...)).
     */
    @TLAPlusOperator(identifier = "TVRead", module = "TraceIO", minLevel = 0)
    public static Value read(final StringValue path) {
        final List<String> lines;
        try {
            lines = Files.readAllLines(Paths.get(path.val.toString()), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new EvalException(EC.GENERAL, "TVRead: cannot read " + path.val + ": " + e);
        }
        final List<Value> traces = new ArrayList<>();
        List<Value> events = null;
        int number = 0;
        for (final String line : lines) {
            number++;
            if (line.isEmpty()) {
                continue;
            }
            if (line.equals("#")) {
                if (events != null) {
                    traces.add(new TupleValue(events.toArray(new Value[0])));
                }
                events = new ArrayList<>();
                continue;
            }
            if (events == null) {
                throw new EvalException(EC.GENERAL, "TVRead: line " + number + " before the first #");
            }
            final Parser p = new Parser(line, number);
            events.add(p.value());
            p.end();
        }
        if (events != null) {
            traces.add(new TupleValue(events.toArray(new Value[0])));
        }
        return new TupleValue(traces.toArray(new Value[0]));
    }

    // ------------------------------------------------------------------ TraceOps
    // Native versions of the operators of the generated module TraceOps, which the mappings'
    // post-state expressions use. Each computes exactly its TLA+ definition (given there, and
    // used by TLC when this class is not on the classpath); tests compare the two on every
    // kind of argument. Interpreted, the RRef mapping's slices were a quarter of TLC's time:
    // they walk every UserRRef of a trace, element by element through TLC's evaluator.

    /**
     * TraceOps!TVSliceBy(X, U, k, w) == {x \in X : x \in DOMAIN U /\ U[x][k] = w}: the part
     * of the set X whose entry in the function U (of records) has w in field k.
     */
    @TLAPlusOperator(identifier = "TVSliceBy", module = "TraceOps", minLevel = 0)
    public static Value sliceBy(final Value xs, final Value fn, final Value key, final Value w) {
        final SetEnumValue set = asSet(xs, "TVSliceBy");
        final FcnRcdValue f = asFunction(fn, "TVSliceBy");
        final ValueVec out = new ValueVec();
        for (int i = 0; i < set.elems.size(); i++) {
            final Value x = set.elems.elementAt(i);
            final Value u = lookup(f, x);
            if (u != null && field(u, key, "TVSliceBy").equals(w)) {
                out.addElement(x);
            }
        }
        return new SetEnumValue(out, true); // a subsequence of a sorted set is sorted
    }

    /**
     * TraceOps!TVImageBy(U, k, w) == {U[x] : x \in {y \in DOMAIN U : U[y][k] = w}}: the
     * entries of the function U (of records) that have w in field k.
     */
    @TLAPlusOperator(identifier = "TVImageBy", module = "TraceOps", minLevel = 0)
    public static Value imageBy(final Value fn, final Value key, final Value w) {
        final FcnRcdValue f = asFunction(fn, "TVImageBy");
        final ValueVec out = new ValueVec();
        for (int i = 0; i < f.values.length; i++) {
            if (field(f.values[i], key, "TVImageBy").equals(w)) {
                out.addElement(f.values[i]);
            }
        }
        return new SetEnumValue(out, false).normalize();
    }

    /**
     * TraceOps!TVPatch(S, R, A) == (S \ R) \cup A: a logged set rebuilt from its last value
     * and the step's difference, sorted by one merge (TLC's \cup leaves its result unsorted,
     * and the post-state comparison then sorted it again).
     */
    @TLAPlusOperator(identifier = "TVPatch", module = "TraceOps", minLevel = 0)
    public static Value patch(final Value s0, final Value r0, final Value a0) {
        final SetEnumValue s = asSet(s0, "TVPatch");
        final SetEnumValue r = asSet(r0, "TVPatch");
        final SetEnumValue a = asSet(a0, "TVPatch");
        if (!(s.isNormalized() && r.isNormalized() && a.isNormalized())) {
            // elements TLC cannot order (mixed kinds): its own operators, as the definition
            return ((SetEnumValue) s.diff(r)).cup(a);
        }
        final ValueVec out = new ValueVec(s.elems.size() + a.elems.size());
        int i = 0, j = 0, k = 0;
        final int ns = s.elems.size(), nr = r.elems.size(), na = a.elems.size();
        while (i < ns || k < na) {
            if (i < ns) {
                final Value x = s.elems.elementAt(i);
                while (j < nr && r.elems.elementAt(j).compareTo(x) < 0) {
                    j++;
                }
                if (j < nr && r.elems.elementAt(j).compareTo(x) == 0) {
                    i++; // removed
                    continue;
                }
                if (k < na) {
                    final int c = x.compareTo(a.elems.elementAt(k));
                    if (c == 0) {
                        k++; // in both: once
                    } else if (c > 0) {
                        out.addElement(a.elems.elementAt(k++));
                        continue;
                    }
                }
                out.addElement(x);
                i++;
            } else {
                out.addElement(a.elems.elementAt(k++));
            }
        }
        return new SetEnumValue(out, true);
    }

    /**
     * TraceOps!TVMinus(S, T) == S \ T, by one merge of the two sets sorted: TLC's \ looks each
     * element of S up in T, a binary search of comparisons per element (the RRef mapping's
     * delivered message is net \ net', two sets of message records, about 70 each).
     */
    @TLAPlusOperator(identifier = "TVMinus", module = "TraceOps", minLevel = 0)
    public static Value minus(final Value s0, final Value t0) {
        final SetEnumValue s = toSet(s0, "TVMinus");
        final SetEnumValue t = toSet(t0, "TVMinus");
        if (s == t) { // TVMinus(X', X) of a step that left X alone
            return new SetEnumValue(new ValueVec(), true);
        }
        // TVMinus(X', X): X' is often X with a step's elements appended; TVMinus(net, net'):
        // net' is net with a message taken out and the replies appended
        final Value[] added = Grown.sort(s, t);
        if (added != null) {
            return new SetEnumValue(new ValueVec(added), true);
        }
        Grown.sort(t, s);
        s.normalize();
        t.normalize();
        if (!(s.isNormalized() && t.isNormalized())) {
            return s.diff(t); // elements TLC cannot order: its own operator, as the definition
        }
        final ValueVec out = new ValueVec();
        final int ns = s.elems.size(), nt = t.elems.size();
        int j = 0;
        for (int i = 0; i < ns; i++) {
            final Value x = s.elems.elementAt(i);
            int c = 1;
            while (j < nt && (c = same(t.elems.elementAt(j), x)) < 0) {
                j++;
            }
            if (j < nt && c == 0) {
                j++; // matched: the next element of S starts after it
            } else {
                out.addElement(x);
            }
        }
        return new SetEnumValue(out, true);
    }

    /**
     * TraceOps!TVNewEntries(U, V) == {V[x] : x \\in DOMAIN V \\ DOMAIN U}: the records a step
     * added to a function that only grows (the RRef mapping's usersAdded), by one merge of
     * the two domains sorted; nothing when the step left V as U (the same object).
     */
    @TLAPlusOperator(identifier = "TVNewEntries", module = "TraceOps", minLevel = 0)
    public static Value newEntries(final Value u0, final Value v0) {
        if (u0 == v0) {
            return new SetEnumValue(new ValueVec(), true);
        }
        final FcnRcdValue u = asFunction(u0, "TVNewEntries");
        final FcnRcdValue v = asFunction(v0, "TVNewEntries");
        if (u.intv != null || v.intv != null) { // an integer interval as domain: TLC's way
            final ValueVec out = new ValueVec();
            final Value[] dom = v.getDomainAsValues();
            for (int i = 0; i < v.values.length; i++) {
                final Value x = dom[i];
                if (lookup(u, x) == null) {
                    out.addElement(v.values[i]);
                }
            }
            return new SetEnumValue(out, false).normalize();
        }
        final ValueVec out = new ValueVec();
        final int nu = u.domain.length, nv = v.domain.length;
        int j = 0;
        for (int i = 0; i < nv; i++) {
            final Value x = v.domain[i];
            int c = 1;
            while (j < nu && (c = same(u.domain[j], x)) < 0) {
                j++;
            }
            if (j < nu && c == 0) {
                j++; // matched: the next key of V starts after it
            } else {
                out.addElement(v.values[i]);
            }
        }
        return new SetEnumValue(out, false).normalize();
    }

    /**
     * a.compareTo(b), 0 at once when they are the same object: a step's post-state shares
     * most of its elements with the pre-state's, so merging the two compares pointers.
     */
    private static int same(final Value a, final Value b) {
        return a == b ? 0 : a.compareTo(b);
    }

    /**
     * RRef!AddEntry(fn, x, e) == fn @@ (x :> e), the one way the RRef spec grows users. TLC's
     * @@ copies both functions into new vectors and looks each key of the second up in the
     * first by a linear scan, and the result is unsorted, so the next lookup in it hashes
     * every key into an index (about 40% and 30% of TLC's time on a 100,000-event trace, for
     * a function of thousands of entries). Here: a binary search, one array copy with x's
     * entry in its place, and the index TLC would build, from the keys' cached hash codes.
     * Functions whose domain TLC cannot sort, or an integer interval, go to TLC's @@.
     */
    @TLAPlusOperator(identifier = "AddEntry", module = "RRef", minLevel = 0)
    public static Value addEntry(final Value fn0, final Value x, final Value e) {
        final Value f1 = fn0.toFcnRcd();
        if (f1 instanceof FcnRcdValue) {
            final FcnRcdValue fn = (FcnRcdValue) f1;
            if (fn.domain == null && fn.intv != null && fn.intv.size() == 0) { // <<>>
                return new FcnRcdValue(new Value[] { x }, new Value[] { e }, true);
            }
            if (fn.domain != null) {
                try {
                    final Value out = insertSorted(fn, x, e);
                    if (out != null) {
                        return out;
                    }
                } catch (RuntimeException notComparable) {
                    // keys TLC cannot order (sorting only permutes the entries): its own @@
                }
            }
        }
        return TLC.CombineFcn(fn0, new FcnRcdValue(new Value[] { x }, new Value[] { e }, true));
    }

    /** fn @@ (x :> e) with fn's domain sorted (in place first); null if it cannot be sorted. */
    private static Value insertSorted(final FcnRcdValue fn, final Value x, final Value e) {
        fn.normalize();
        if (!fn.isNormalized()) {
            return null;
        }
        final Value[] dom = fn.domain;
        final int at = search(dom, dom.length, x);
        if (at >= 0) {
            return fn; // f @@ g takes f's entry
        }
        final int lo = -at - 1;
        final int n = dom.length;
        final Value[] d = new Value[n + 1];
        final Value[] v = new Value[n + 1];
        System.arraycopy(dom, 0, d, 0, lo);
        System.arraycopy(fn.values, 0, v, 0, lo);
        d[lo] = x;
        v[lo] = e;
        System.arraycopy(dom, lo, d, lo + 1, n - lo);
        System.arraycopy(fn.values, lo, v, lo + 1, n - lo);
        final FcnRcdValue out = new FcnRcdValue(d, v, true);
        Grown.index(fn, out, lo);
        return out;
    }

    private static SetEnumValue asSet(final Value v, final String op) {
        final SetEnumValue out = toSet(v, op);
        out.normalize();
        return out;
    }

    private static SetEnumValue toSet(final Value v, final String op) {
        final Value set = v.toSetEnum();
        if (!(set instanceof SetEnumValue)) {
            throw new EvalException(EC.GENERAL, op + ": not a finite set: " + v);
        }
        return (SetEnumValue) set;
    }

    private static FcnRcdValue asFunction(final Value v, final String op) {
        final Value f = v.toFcnRcd();
        if (!(f instanceof FcnRcdValue)) {
            throw new EvalException(EC.GENERAL, op + ": not a function: " + v);
        }
        final FcnRcdValue out = (FcnRcdValue) f;
        out.normalize(); // sorted domain: lookups are binary searches
        return out;
    }

    /**
     * Where x is among keys[0, n), sorted: its index, or -(where it would go) - 1, as
     * java.util.Arrays.binarySearch (TLC's Value has compareTo but is not Comparable).
     */
    static int search(final Value[] keys, final int n, final Value x) {
        int lo = 0, hi = n;
        while (lo < hi) {
            final int mid = (lo + hi) >>> 1;
            final int c = keys[mid].compareTo(x);
            if (c == 0) {
                return mid;
            }
            if (c < 0) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return -lo - 1;
    }

    /** f[x] if x \in DOMAIN f, else null (never an error: that is the definitions' guard). */
    private static Value lookup(final FcnRcdValue f, final Value x) {
        if (f.intv != null) { // 1..n: only integers can be in it
            return x instanceof IntValue ? f.select(x) : null;
        }
        if (f.isNormalized() && f.domain != null) {
            // A binary search: select() first hashes the whole domain into an index, once per
            // function value, and a function that grows (users) is a new value at each step.
            final int at = search(f.domain, f.domain.length, x);
            return at >= 0 ? f.values[at] : null;
        }
        return f.select(x);
    }

    /** u[k], failing as TLC does when u has no such field. */
    private static Value field(final Value u, final Value key, final String op) {
        final Value rcd = u.toRcd();
        final Value v = rcd instanceof RecordValue ? ((RecordValue) rcd).select(key) : null;
        if (v == null) {
            throw new EvalException(EC.GENERAL, op + ": " + u + " has no field " + key);
        }
        return v;
    }

    /**
     * Sorting a set that grew by a few elements, in place, without sorting it whole; and the
     * hash index of a new function, from cached hash codes.
     *
     * Under -simulate TLC sorts a set only when an operator needs it sorted, and then by
     * binary insertion: about n log n comparisons even when the set is sorted but for one
     * element. A set that only grows (the RRef spec's deleted, fetched, timedOut, tombstones)
     * grows by X \cup {x}, which TLC builds as X's elements, in X's order, followed by the new
     * ones. Sorting that whole at every step made long traces quadratic. When the grown set's
     * first elements are the sorted base's own (the same objects: one pointer comparison
     * each, no value comparison), only the tail is placed, by binary search and block moves.
     * The value is the same set; only its internal order changes, as TLC's own normalize()
     * changes it, and the next step's membership tests and \cup see a sorted set (binary
     * searches instead of linear scans). Anything else is left to TLC's normalize().
     */
    static final class Grown {
        private static final Field SET_NORM = field(SetEnumValue.class, "isNorm");
        private static final Field FCN_INDEX = field(FcnRcdValue.class, "indexTbl");

        private Grown() {
        }

        private static Field field(final Class<?> c, final String name) {
            try {
                final Field f = c.getDeclaredField(name);
                f.setAccessible(true);
                return f;
            } catch (ReflectiveOperationException | RuntimeException e) {
                return null; // another TLC: its own normalize() does it, more slowly
            }
        }

        /**
         * If {@code grown} starts with {@code base}'s elements in their order, some of them left
         * out ((X \ R) \cup A leaves them so; X \cup A is the case where none is), followed by
         * a few more, sort it in place. Return those few (sorted: grown \ base) when none of
         * base's was left out; otherwise null, and null with nothing changed when grown is not
         * of that shape.
         */
        static Value[] sort(final SetEnumValue grown, final SetEnumValue base) {
            if (SET_NORM == null || grown.isNormalized() || !base.isNormalized()) {
                return null;
            }
            final int n = grown.elems.size(), m = base.elems.size();
            int kept = 0; // grown's first elements that are base's own, in base's order
            for (int j = 0; kept < n && j < m; j++) {
                if (grown.elems.elementAt(kept) == base.elems.elementAt(j)) {
                    kept++;
                }
            }
            final Value[] keys = grown.elems.toArray();
            final Value[] added = insertTail(keys, kept);
            if (added == null) {
                return null;
            }
            grown.elems = new ValueVec(keys);
            mark(SET_NORM, grown, true);
            return kept == m ? added : null;
        }

        /**
         * The keys' hashCode()s of the functions AddEntry built last, by identity: the next
         * AddEntry on one of them copies its array with one more hash instead of hashing every
         * key again. A few suffice (one per trace being checked at a time); the map is cleared
         * when it holds more.
         */
        private static final Map<FcnRcdValue, int[]> HASHES = new IdentityHashMap<>();

        /**
         * {@code out} is {@code fn} with one key inserted at position {@code at}: give it the hash
         * index TLC's FcnRcdValue.select() would build at its first lookup (createIndex: open
         * addressing over 2n + 1 slots, linear probing). TLC's own fingerprints every key of
         * every new function value, and users is a new value at every step that adds a
         * UserRRef. Below 11 keys TLC uses no index (select() then searches).
         */
        static synchronized void index(final FcnRcdValue fn, final FcnRcdValue out, final int at) {
            final Value[] domain = out.domain;
            int[] base = HASHES.get(fn);
            if (base == null) {
                base = new int[fn.domain.length];
                for (int i = 0; i < base.length; i++) {
                    base[i] = fn.domain[i].hashCode();
                }
            }
            final int[] hashes = new int[domain.length];
            System.arraycopy(base, 0, hashes, 0, at);
            hashes[at] = domain[at].hashCode();
            System.arraycopy(base, at, hashes, at + 1, base.length - at);
            if (HASHES.size() >= 16) {
                HASHES.clear();
            }
            HASHES.put(out, hashes);
            if (FCN_INDEX == null || domain.length <= 10) {
                return;
            }
            final int len = domain.length * 2 + 1;
            final int[] table = new int[len];
            Arrays.fill(table, -1);
            for (int i = 0; i < domain.length; i++) {
                int slot = (hashes[i] & 0x7FFFFFFF) % len;
                while (table[slot] != -1) {
                    slot = (slot + 1) % len;
                }
                table[slot] = i;
            }
            mark(FCN_INDEX, out, table);
        }

        private static void mark(final Field f, final Object target, final Object value) {
            try {
                f.set(target, value);
            } catch (IllegalAccessException e) {
                throw new IllegalStateException(e); // setAccessible succeeded when loaded
            }
        }

        /**
         * keys[0, m) sorted, keys[m, n) not: sort the whole in place and return the tail's keys
         * sorted. Null, with nothing changed, if a tail key equals another key (not a set that
         * grew: TLC's normalize() decides).
         */
        static Value[] insertTail(final Value[] keys, final int m) {
            final int n = keys.length, k = n - m;
            if (k == 0) {
                return new Value[0];
            }
            final Integer[] order = new Integer[k]; // the tail's positions, sorted by key
            for (int i = 0; i < k; i++) {
                order[i] = m + i;
            }
            Arrays.sort(order, (a, b) -> keys[a].compareTo(keys[b]));
            final int[] at = new int[k]; // where each tail key goes among the prefix's
            for (int i = 0; i < k; i++) {
                final Value x = keys[order[i]];
                if (i > 0 && keys[order[i - 1]].compareTo(x) == 0) {
                    return null;
                }
                final int found = search(keys, m, x);
                if (found >= 0) {
                    return null;
                }
                at[i] = -found - 1;
            }
            final Value[] tailKeys = new Value[k];
            for (int i = 0; i < k; i++) {
                tailKeys[i] = keys[order[i]];
            }
            // From the back: the prefix keys from at[i] up to the previous insertion point
            // move up by i + 1 (the tail keys that go before or at them, this one included).
            int end = m;
            for (int i = k - 1; i >= 0; i--) {
                System.arraycopy(keys, at[i], keys, at[i] + i + 1, end - at[i]);
                keys[at[i] + i] = tailKeys[i];
                end = at[i];
            }
            return tailKeys;
        }
    }

    /** A recursive-descent reader of one line; nesting depth is bounded by the trace's. */
    private static final class Parser {
        private final String s;
        private final int line;
        private int i;

        Parser(final String s, final int line) {
            this.s = s;
            this.line = line;
        }

        private EvalException error(final String what) {
            return new EvalException(EC.GENERAL,
                    "TVRead: line " + line + ", column " + (i + 1) + ": " + what);
        }

        private void skip() {
            while (i < s.length() && s.charAt(i) == ' ') {
                i++;
            }
        }

        private boolean eat(final String token) {
            skip();
            if (s.startsWith(token, i)) {
                i += token.length();
                return true;
            }
            return false;
        }

        private void expect(final String token) {
            if (!eat(token)) {
                throw error("expected " + token);
            }
        }

        void end() {
            skip();
            if (i != s.length()) {
                throw error("unexpected text after the value");
            }
        }

        Value value() {
            skip();
            if (i >= s.length()) {
                throw error("a value is missing");
            }
            final char c = s.charAt(i);
            if (c == '"') {
                return string();
            }
            if (c == '-' || Character.isDigit(c)) {
                return integer();
            }
            if (eat("<<")) {
                final List<Value> items = items(">>");
                return new TupleValue(items.toArray(new Value[0]));
            }
            if (eat("{")) {
                final List<Value> items = items("}");
                return new SetEnumValue(items.toArray(new Value[0]), false).normalize();
            }
            if (eat("[")) {
                return record();
            }
            if (eat("(")) {
                return function();
            }
            return word();
        }

        private List<Value> items(final String close) {
            final List<Value> items = new ArrayList<>();
            if (eat(close)) {
                return items;
            }
            do {
                items.add(value());
            } while (eat(","));
            expect(close);
            return items;
        }

        private Value record() {
            final List<UniqueString> names = new ArrayList<>();
            final List<Value> values = new ArrayList<>();
            do {
                names.add(UniqueString.uniqueStringOf(identifier()));
                expect("|->");
                values.add(value());
            } while (eat(","));
            expect("]");
            return new RecordValue(names.toArray(new UniqueString[0]), values.toArray(new Value[0]), false)
                    .normalize();
        }

        private Value function() {
            final List<Value> domain = new ArrayList<>();
            final List<Value> values = new ArrayList<>();
            do {
                domain.add(value());
                expect(":>");
                values.add(value());
            } while (eat("@@"));
            expect(")");
            return new FcnRcdValue(domain.toArray(new Value[0]), values.toArray(new Value[0]), false)
                    .normalize();
        }

        private String identifier() {
            skip();
            final int start = i;
            while (i < s.length() && (Character.isLetterOrDigit(s.charAt(i)) || s.charAt(i) == '_')) {
                i++;
            }
            if (start == i) {
                throw error("expected a name");
            }
            return s.substring(start, i);
        }

        private Value word() {
            final String name = identifier();
            if (name.equals("TRUE")) {
                return BoolValue.ValTrue;
            }
            if (name.equals("FALSE")) {
                return BoolValue.ValFalse;
            }
            return ModelValue.make(name);
        }

        private Value integer() {
            final int start = i;
            if (s.charAt(i) == '-') {
                i++;
            }
            while (i < s.length() && Character.isDigit(s.charAt(i))) {
                i++;
            }
            try {
                return IntValue.gen(Integer.parseInt(s.substring(start, i)));
            } catch (NumberFormatException e) {
                throw error("not a 32-bit integer: " + s.substring(start, i));
            }
        }

        private Value string() {
            final StringBuilder out = new StringBuilder();
            i++; // the opening quote
            while (i < s.length()) {
                final char c = s.charAt(i++);
                if (c == '"') {
                    return new StringValue(out.toString());
                }
                if (c != '\\') {
                    out.append(c);
                    continue;
                }
                if (i >= s.length()) {
                    break;
                }
                final char e = s.charAt(i++);
                switch (e) {
                case 'n': out.append('\n'); break;
                case 't': out.append('\t'); break;
                case 'r': out.append('\r'); break;
                case 'f': out.append('\f'); break;
                default: out.append(e); // \" and \\
                }
            }
            throw error("unterminated string");
        }
    }
}
