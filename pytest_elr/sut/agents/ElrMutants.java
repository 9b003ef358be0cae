/*
 * pytest-elr's mutation agent: plants one small change in one method of Kafka's bytecode as the
 * class loads, so the KIP suite can be graded by bugs in the real controller and partition leader.
 *
 *   java -javaagent:elr-mutants.jar=MUTANT_ID ...        plant one mutant (JAVA_TOOL_OPTIONS)
 *   java -cp elr-mutants.jar:asm.jar:asm-tree.jar ElrMutants list JAR... --class NAME...
 *                                                         every mutant of those classes, one per line
 *
 * A mutant's id is stable for a given class file: CLASS#METHOD(ARGS)RETURN:LINE:OPERATOR:INDEX, the
 * INDEX-th site of OPERATOR in that method (counted in instruction order). Listing and planting walk
 * the same sites with the same code, so an id from `list` names the same instruction in the agent.
 * When the agent plants it, it writes PLANTED_FILE (the id, or "missing: ID" if the class loaded
 * without that site): the harness reads it to tell a mutant that ran from one that never loaded.
 *
 * Operators (the classic ones of mutation testing, as PIT names them):
 *   NEGATE_CONDITIONALS     a conditional jump tests the opposite condition
 *   CONDITIONALS_BOUNDARY   < becomes <=, <= becomes <, > becomes >=, >= becomes >
 *   VOID_METHOD_CALLS       a call of a void method is removed (its receiver and arguments popped)
 *   TRUE_RETURNS / FALSE_RETURNS  a boolean method returns true / false at that return
 *   EMPTY_RETURNS           a method returning a java.util List, Set, Map, Collection or Optional
 *                           returns an empty one at that return
 *   INCREMENTS              an increment of a local (i++, i += n) is removed
 * Each rewrite keeps the operand stack's shape at every instruction, so the class's stack map
 * frames stay valid and the class is written back without recomputing them.
 */

import java.io.File;
import java.io.InputStream;
import java.io.PrintStream;
import java.lang.instrument.ClassFileTransformer;
import java.lang.instrument.Instrumentation;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.security.ProtectionDomain;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;

import org.objectweb.asm.ClassReader;
import org.objectweb.asm.ClassWriter;
import org.objectweb.asm.Opcodes;
import org.objectweb.asm.Type;
import org.objectweb.asm.tree.AbstractInsnNode;
import org.objectweb.asm.tree.ClassNode;
import org.objectweb.asm.tree.IincInsnNode;
import org.objectweb.asm.tree.InsnList;
import org.objectweb.asm.tree.InsnNode;
import org.objectweb.asm.tree.JumpInsnNode;
import org.objectweb.asm.tree.LabelNode;
import org.objectweb.asm.tree.LineNumberNode;
import org.objectweb.asm.tree.MethodInsnNode;
import org.objectweb.asm.tree.MethodNode;

public final class ElrMutants {
    /** Where the agent says what it planted ($ELR_MUTANT_PLANTED_FILE, else the node's run dir). */
    static final String PLANTED_FILE = System.getenv("ELR_MUTANT_PLANTED_FILE") != null
        ? System.getenv("ELR_MUTANT_PLANTED_FILE") : "/run/kafka/elr-mutant.planted";

    /** One place a mutant can be planted. */
    static final class Site {
        final String className;  // dotted
        final MethodNode method;
        final int line;
        final String operator;
        final int index;
        final AbstractInsnNode insn;
        final String description;

        Site(String className, MethodNode method, int line, String operator, int index,
             AbstractInsnNode insn, String description) {
            this.className = className;
            this.method = method;
            this.line = line;
            this.operator = operator;
            this.index = index;
            this.insn = insn;
            this.description = description;
        }

        String id() {
            return className + "#" + method.name + method.desc + ":" + line + ":" + operator + ":" + index;
        }
    }

    // ------------------------------------------------------------------ the operators

    static final Map<Integer, Integer> NEGATED = new HashMap<>();
    static final Map<Integer, Integer> BOUNDARY = new HashMap<>();
    static final Map<Integer, String> CONDITION = new HashMap<>();

    static {
        int[][] negations = {
            {Opcodes.IFEQ, Opcodes.IFNE}, {Opcodes.IFLT, Opcodes.IFGE}, {Opcodes.IFGT, Opcodes.IFLE},
            {Opcodes.IF_ICMPEQ, Opcodes.IF_ICMPNE}, {Opcodes.IF_ICMPLT, Opcodes.IF_ICMPGE},
            {Opcodes.IF_ICMPGT, Opcodes.IF_ICMPLE}, {Opcodes.IF_ACMPEQ, Opcodes.IF_ACMPNE},
            {Opcodes.IFNULL, Opcodes.IFNONNULL},
        };
        for (int[] pair : negations) {
            NEGATED.put(pair[0], pair[1]);
            NEGATED.put(pair[1], pair[0]);
        }
        int[][] boundaries = {
            {Opcodes.IFLT, Opcodes.IFLE}, {Opcodes.IFGT, Opcodes.IFGE},
            {Opcodes.IF_ICMPLT, Opcodes.IF_ICMPLE}, {Opcodes.IF_ICMPGT, Opcodes.IF_ICMPGE},
        };
        for (int[] pair : boundaries) {
            BOUNDARY.put(pair[0], pair[1]);
            BOUNDARY.put(pair[1], pair[0]);
        }
        // The jump's condition as source would write it (x against zero, or a against b).
        CONDITION.put(Opcodes.IFEQ, "x == 0");
        CONDITION.put(Opcodes.IFNE, "x != 0");
        CONDITION.put(Opcodes.IFLT, "x < 0");
        CONDITION.put(Opcodes.IFGE, "x >= 0");
        CONDITION.put(Opcodes.IFGT, "x > 0");
        CONDITION.put(Opcodes.IFLE, "x <= 0");
        CONDITION.put(Opcodes.IF_ICMPEQ, "a == b");
        CONDITION.put(Opcodes.IF_ICMPNE, "a != b");
        CONDITION.put(Opcodes.IF_ICMPLT, "a < b");
        CONDITION.put(Opcodes.IF_ICMPGE, "a >= b");
        CONDITION.put(Opcodes.IF_ICMPGT, "a > b");
        CONDITION.put(Opcodes.IF_ICMPLE, "a <= b");
        CONDITION.put(Opcodes.IF_ACMPEQ, "a == b (same object)");
        CONDITION.put(Opcodes.IF_ACMPNE, "a != b (same object)");
        CONDITION.put(Opcodes.IFNULL, "x == null");
        CONDITION.put(Opcodes.IFNONNULL, "x != null");
    }

    static final Map<String, String[]> EMPTY = new HashMap<>();

    static {
        EMPTY.put("java/util/List", new String[] {"java/util/Collections", "emptyList", "()Ljava/util/List;"});
        EMPTY.put("java/util/Collection", new String[] {"java/util/Collections", "emptyList", "()Ljava/util/List;"});
        EMPTY.put("java/util/Set", new String[] {"java/util/Collections", "emptySet", "()Ljava/util/Set;"});
        EMPTY.put("java/util/Map", new String[] {"java/util/Collections", "emptyMap", "()Ljava/util/Map;"});
        EMPTY.put("java/util/Optional", new String[] {"java/util/Optional", "empty", "()Ljava/util/Optional;"});
    }

    /** Every site of every operator in one method, in instruction order per operator. */
    static List<Site> sites(String className, MethodNode m) {
        List<Site> out = new ArrayList<>();
        Map<String, Integer> counts = new HashMap<>();
        Type returns = Type.getReturnType(m.desc);
        int line = -1;
        for (AbstractInsnNode insn = m.instructions.getFirst(); insn != null; insn = insn.getNext()) {
            if (insn instanceof LineNumberNode) {
                line = ((LineNumberNode) insn).line;
                continue;
            }
            int op = insn.getOpcode();
            List<String[]> found = new ArrayList<>();  // {operator, description}
            if (insn instanceof JumpInsnNode && NEGATED.containsKey(op)) {
                found.add(new String[] {"NEGATE_CONDITIONALS",
                    "jump if `" + CONDITION.get(op) + "` became `" + CONDITION.get(NEGATED.get(op)) + "`"});
                if (BOUNDARY.containsKey(op)) {
                    found.add(new String[] {"CONDITIONALS_BOUNDARY",
                        "`" + CONDITION.get(op) + "` became `" + CONDITION.get(BOUNDARY.get(op)) + "`"});
                }
            } else if (insn instanceof MethodInsnNode) {
                MethodInsnNode call = (MethodInsnNode) insn;
                if (Type.getReturnType(call.desc) == Type.VOID_TYPE && !call.name.equals("<init>")) {
                    found.add(new String[] {"VOID_METHOD_CALLS",
                        "call of " + simple(call.owner) + "." + call.name + " removed"});
                }
            } else if (op == Opcodes.IRETURN && returns == Type.BOOLEAN_TYPE) {
                // A return of a literal is not mutated into that same literal (an equivalent mutant);
                // a label between them means other paths reach this return with other values.
                AbstractInsnNode before = previousOnThisPath(insn);
                int constant = before == null ? -1 : before.getOpcode();
                if (constant != Opcodes.ICONST_1) {
                    found.add(new String[] {"TRUE_RETURNS", "returns true"});
                }
                if (constant != Opcodes.ICONST_0) {
                    found.add(new String[] {"FALSE_RETURNS", "returns false"});
                }
            } else if (op == Opcodes.ARETURN && returns.getSort() == Type.OBJECT
                       && EMPTY.containsKey(returns.getInternalName())) {
                found.add(new String[] {"EMPTY_RETURNS", "returns an empty " + simple(returns.getInternalName())});
            } else if (insn instanceof IincInsnNode) {
                int by = ((IincInsnNode) insn).incr;
                found.add(new String[] {"INCREMENTS", "local += " + by + " removed"});
            }
            for (String[] f : found) {
                int index = counts.merge(f[0], 1, Integer::sum) - 1;
                out.add(new Site(className, m, line, f[0], index, insn, f[1]));
            }
        }
        return out;
    }

    /** The instruction just before, when only it leads here (null when a jump target is between). */
    static AbstractInsnNode previousOnThisPath(AbstractInsnNode insn) {
        AbstractInsnNode p = insn.getPrevious();
        while (p != null && p.getOpcode() < 0) {
            if (p instanceof LabelNode) {
                return null;
            }
            p = p.getPrevious();
        }
        return p;
    }

    static String simple(String internalName) {
        return internalName.substring(internalName.lastIndexOf('/') + 1);
    }

    /** Rewrite the site's instruction in place (the method's other instructions are untouched). */
    static void plant(Site s) {
        InsnList code = s.method.instructions;
        AbstractInsnNode insn = s.insn;
        switch (s.operator) {
            case "NEGATE_CONDITIONALS":
                ((JumpInsnNode) insn).setOpcode(NEGATED.get(insn.getOpcode()));
                break;
            case "CONDITIONALS_BOUNDARY":
                ((JumpInsnNode) insn).setOpcode(BOUNDARY.get(insn.getOpcode()));
                break;
            case "VOID_METHOD_CALLS": {
                MethodInsnNode call = (MethodInsnNode) insn;
                InsnList pops = new InsnList();
                Type[] args = Type.getArgumentTypes(call.desc);
                for (int i = args.length - 1; i >= 0; i--) {
                    pops.add(new InsnNode(args[i].getSize() == 2 ? Opcodes.POP2 : Opcodes.POP));
                }
                if (call.getOpcode() != Opcodes.INVOKESTATIC) {
                    pops.add(new InsnNode(Opcodes.POP));  // the receiver
                }
                code.insert(insn, pops);
                code.remove(insn);
                break;
            }
            case "TRUE_RETURNS":
            case "FALSE_RETURNS": {
                InsnList swap = new InsnList();
                swap.add(new InsnNode(Opcodes.POP));
                swap.add(new InsnNode(s.operator.equals("TRUE_RETURNS") ? Opcodes.ICONST_1 : Opcodes.ICONST_0));
                code.insertBefore(insn, swap);
                break;
            }
            case "EMPTY_RETURNS": {
                String[] empty = EMPTY.get(Type.getReturnType(s.method.desc).getInternalName());
                InsnList swap = new InsnList();
                swap.add(new InsnNode(Opcodes.POP));
                swap.add(new MethodInsnNode(Opcodes.INVOKESTATIC, empty[0], empty[1], empty[2], false));
                code.insertBefore(insn, swap);
                break;
            }
            case "INCREMENTS":
                code.set(insn, new InsnNode(Opcodes.NOP));
                break;
            default:
                throw new IllegalArgumentException("unknown operator " + s.operator);
        }
    }

    static ClassNode read(byte[] bytes) {
        ClassNode cn = new ClassNode();
        new ClassReader(bytes).accept(cn, 0);  // frames kept as they are: no rewrite changes them
        return cn;
    }

    static List<Site> sitesOf(ClassNode cn) {
        List<Site> out = new ArrayList<>();
        String dotted = cn.name.replace('/', '.');
        for (MethodNode m : cn.methods) {
            out.addAll(sites(dotted, m));
        }
        return out;
    }

    // ------------------------------------------------------------------ the agent

    public static void premain(String mutantId, Instrumentation inst) {
        if (mutantId == null || mutantId.isEmpty()) {
            return;
        }
        String className = mutantId.substring(0, mutantId.indexOf('#'));
        String internal = className.replace('.', '/');
        inst.addTransformer(new ClassFileTransformer() {
            @Override
            public byte[] transform(ClassLoader loader, String name, Class<?> redefined,
                                    ProtectionDomain domain, byte[] bytes) {
                if (!internal.equals(name)) {
                    return null;
                }
                try {
                    ClassNode cn = read(bytes);
                    for (Site s : sitesOf(cn)) {
                        if (s.id().equals(mutantId)) {
                            plant(s);
                            ClassWriter out = new ClassWriter(0);
                            cn.accept(out);
                            report(mutantId, "[elr-mutants] planted " + mutantId + ": " + s.description);
                            return out.toByteArray();
                        }
                    }
                    report("missing: " + mutantId, "[elr-mutants] no site " + mutantId + " in " + className);
                } catch (Throwable t) {
                    report("failed: " + mutantId, "[elr-mutants] could not plant " + mutantId + ": " + t);
                }
                return null;
            }
        });
    }

    static void report(String planted, String line) {
        System.err.println(line);
        try {
            Files.write(Paths.get(PLANTED_FILE), (planted + "\n").getBytes(StandardCharsets.UTF_8));
        } catch (Exception e) {
            System.err.println("[elr-mutants] cannot write " + PLANTED_FILE + ": " + e);
        }
    }

    // ------------------------------------------------------------------ listing

    /** list JAR_OR_DIR... --class NAME...: one tab-separated line per site (id, line, operator, description). */
    public static void main(String[] args) throws Exception {
        if (args.length == 0 || !args[0].equals("list")) {
            System.err.println("usage: ElrMutants list JAR... --class NAME...");
            System.exit(2);
        }
        List<String> jars = new ArrayList<>();
        Set<String> classes = new LinkedHashSet<>();
        for (int i = 1; i < args.length; i++) {
            if (args[i].equals("--class") && i + 1 < args.length) {
                classes.add(args[++i].replace('.', '/') + ".class");
            } else {
                jars.add(args[i]);
            }
        }
        PrintStream out = new PrintStream(System.out, false, "UTF-8");
        Set<String> seen = new LinkedHashSet<>();
        for (String jar : jars) {
            File f = new File(jar);
            if (!f.getName().endsWith(".jar")) {
                continue;
            }
            try (JarFile jf = new JarFile(f)) {
                for (String entry : classes) {
                    JarEntry e = jf.getJarEntry(entry);
                    if (e == null || !seen.add(entry)) {
                        continue;
                    }
                    try (InputStream in = jf.getInputStream(e)) {
                        for (Site s : sitesOf(read(in.readAllBytes()))) {
                            out.println(s.id() + "\t" + s.line + "\t" + s.operator + "\t" + s.description);
                        }
                    }
                }
            }
        }
        for (String entry : classes) {
            if (!seen.contains(entry)) {
                System.err.println("not found: " + entry);
            }
        }
        out.flush();
    }
}
