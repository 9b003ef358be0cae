// The file I/O patterns of a Kafka broker's log dir, as the JVM issues them.
// Usage: java KafkaLikeIO.java LOGDIR   (prints READY, then waits to be killed)
import java.io.File;
import java.io.FileOutputStream;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;

public class KafkaLikeIO {
    public static void main(String[] args) throws Exception {
        Path dir = Paths.get(args[0]);
        Path part = dir.resolve("topic-0");
        Files.createDirectories(part);  // LogManager: new partition dir
        flushDir(dir);

        // FileRecords.openChannel: CREATE_NEW, READ, WRITE; appends at the channel position
        FileChannel log = FileChannel.open(part.resolve("00000000000000000000.log"),
                StandardOpenOption.CREATE_NEW, StandardOpenOption.READ, StandardOpenOption.WRITE);
        // AbstractIndex: preallocate with setLength, map, close the file at once
        File idx = part.resolve("00000000000000000000.index").toFile();
        RandomAccessFile raf = new RandomAccessFile(idx, "rw");
        raf.setLength(1 << 20);
        MappedByteBuffer index = raf.getChannel().map(FileChannel.MapMode.READ_WRITE, 0, 1 << 20);
        raf.close();
        flushDir(part);  // LocalLog flushes the dir after a roll

        append(log, 'A', 1000);
        index.putInt(0, 1).putInt(4, 0);
        log.force(true);  // LogSegment.flush: log then index
        index.force();

        append(log, 'B', 1000);  // never flushed
        index.putInt(8, 2).putInt(12, 1000);

        checkpoint(dir.resolve("recovery-point-offset-checkpoint"), "v1", true);
        checkpoint(dir.resolve("recovery-point-offset-checkpoint"), "v2", false);

        System.out.println("READY");
        System.out.flush();
        Thread.sleep(60_000);
    }

    static void append(FileChannel ch, char c, int n) throws Exception {
        ByteBuffer buf = ByteBuffer.allocate(n);
        for (int i = 0; i < n; i++) buf.put((byte) c);
        buf.flip();
        while (buf.hasRemaining()) ch.write(buf);
    }

    // Kafka's CheckpointFile: write tmp, fsync, Utils.atomicMoveWithFallback (+ flushDir)
    static void checkpoint(Path file, String content, boolean flushDir) throws Exception {
        Path tmp = Paths.get(file + ".tmp");
        try (FileOutputStream out = new FileOutputStream(tmp.toFile())) {
            out.write(content.getBytes(StandardCharsets.UTF_8));
            out.flush();
            out.getFD().sync();
        }
        Files.move(tmp, file, StandardCopyOption.ATOMIC_MOVE);
        if (flushDir) flushDir(file.getParent());
    }

    // Utils.flushDir: fsync on a directory fd
    static void flushDir(Path dir) throws Exception {
        try (FileChannel ch = FileChannel.open(dir, StandardOpenOption.READ)) {
            ch.force(true);
        }
    }
}
