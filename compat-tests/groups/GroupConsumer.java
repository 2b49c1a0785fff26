// A classic-protocol group member for the runnel compatibility suite, compiled at test
// time with javac against the Kafka 4.4 jars (compat-tests/groups/harness.py).
//
//   java GroupConsumer BOOTSTRAP TOPIC GROUP NAME STRATEGY SESSION_MS CTL_DIR
//
// STRATEGY is "range" or "cooperative-sticky". Subscribes to TOPIC, auto.offset.reset
// earliest, no auto-commit: after processing each non-empty poll it commits the next
// offsets synchronously (commit-after-processing), unless CTL_DIR/NAME.nocommit exists.
// Exits after a clean close() once CTL_DIR/stop exists. Prints one JSON line per event:
//   {"e":"assigned"|"revoked"|"lost","ps":[...]}   rebalance listener callbacks
//   {"e":"rec","p":P,"o":O,"v":"..."}              a record, after processing
//   {"e":"commit","offs":{"P":next,...}}           a successful commitSync
//   {"e":"commit_error","err":"..."}               a failed one
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class GroupConsumer {
    static synchronized void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static String partitions(Collection<TopicPartition> tps) {
        List<Integer> ps = new ArrayList<>();
        for (TopicPartition tp : tps) ps.add(tp.partition());
        Collections.sort(ps);
        return ps.toString();
    }

    static String quote(String s) {
        return "\"" + String.valueOf(s).replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2], name = args[3];
        String strategy = args[4];
        int sessionMs = Integer.parseInt(args[5]);
        Path ctl = Paths.get(args[6]);

        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("group.protocol", "classic");
        p.put("client.id", name);
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("session.timeout.ms", String.valueOf(sessionMs));
        p.put("heartbeat.interval.ms", String.valueOf(Math.max(500, sessionMs / 6)));
        p.put("max.poll.records", "50");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("partition.assignment.strategy", strategy.equals("cooperative-sticky")
                ? CooperativeStickyAssignor.class.getName() : RangeAssignor.class.getName());

        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p);
        consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            public void onPartitionsRevoked(Collection<TopicPartition> tps) {
                emit("{\"e\":\"revoked\",\"ps\":" + partitions(tps) + "}");
            }

            public void onPartitionsAssigned(Collection<TopicPartition> tps) {
                emit("{\"e\":\"assigned\",\"ps\":" + partitions(tps) + "}");
            }

            public void onPartitionsLost(Collection<TopicPartition> tps) {
                emit("{\"e\":\"lost\",\"ps\":" + partitions(tps) + "}");
            }
        });
        emit("{\"e\":\"started\"}");
        while (!Files.exists(ctl.resolve("stop"))) {
            ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
            if (records.isEmpty()) continue;
            Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
            for (ConsumerRecord<String, String> r : records) {
                emit("{\"e\":\"rec\",\"p\":" + r.partition() + ",\"o\":" + r.offset()
                        + ",\"v\":" + quote(r.value()) + "}");
                next.put(new TopicPartition(r.topic(), r.partition()),
                        new OffsetAndMetadata(r.offset() + 1));
            }
            if (Files.exists(ctl.resolve(name + ".nocommit"))) continue;
            try {
                consumer.commitSync(next);
                StringBuilder sb = new StringBuilder("{\"e\":\"commit\",\"offs\":{");
                String sep = "";
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : next.entrySet()) {
                    sb.append(sep).append('"').append(e.getKey().partition()).append("\":")
                            .append(e.getValue().offset());
                    sep = ",";
                }
                emit(sb.append("}}").toString());
            } catch (Exception e) {
                emit("{\"e\":\"commit_error\",\"err\":" + quote(e.toString()) + "}");
            }
        }
        consumer.close();
        emit("{\"e\":\"closed\"}");
    }
}
