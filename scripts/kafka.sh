#!/usr/bin/env bash
# kafka.sh — a real Apache Kafka broker for denoiser's integration tests.
#
# Installs Apache Kafka from Maven Central (no tarball download needed: the
# build machine only reaches package registries), then runs ONE combined
# broker+controller in KRaft mode on 127.0.0.1 with small test settings.
#
# Usage: scripts/kafka.sh install|start|stop|restart|pause|resume|status|reset|logs
#
#   install   fetch the broker jars into $KAFKA_HOME_DIR/libs (idempotent)
#   start     install if needed, format storage if new, start in the
#             background, wait until it serves; no-op if already running
#   stop      SIGTERM, wait up to $KAFKA_STOP_TIMEOUT s, then SIGKILL;
#             idempotent
#   restart   stop then start; data is kept (storage is never re-formatted)
#   pause     SIGSTOP the broker: its sockets stay open and accept, but
#             nothing answers (a hung broker, for shutdown tests)
#   resume    SIGCONT a paused broker
#   status    print state; exit 0 only if running and answering
#   reset     stop and delete $KAFKA_RUN_DIR (all topics and data)
#   logs      print the last 100 lines of the broker log
#
# Environment (defaults in brackets):
#   KAFKA_HOME_DIR         install dir [$HOME/.cache/denoiser/kafka-3.9.1]
#   KAFKA_RUN_DIR          config, data, logs, pid file [/tmp/denoiser-kafka]
#   KAFKA_PORT             client listener port [19092]
#   KAFKA_CONTROLLER_PORT  KRaft controller port [19093]
#   KAFKA_HEAP_OPTS        JVM heap [-Xmx512m -Xms512m]
#   KAFKA_START_TIMEOUT    seconds to wait for the broker to serve [180]
#   KAFKA_STOP_TIMEOUT     seconds to wait after SIGTERM before SIGKILL [30]
#   JAVA                   java binary [java]
#   MVN                    maven binary [mvn]
#
# On success `start` prints the bootstrap address (127.0.0.1:$KAFKA_PORT) on
# stdout; everything else goes to stderr.
set -euo pipefail

readonly KAFKA_VERSION=3.9.1
readonly SCALA_VERSION=2.13
readonly SLF4J_VERSION=1.7.36
readonly RELOAD4J_VERSION=1.2.25

KAFKA_HOME_DIR=${KAFKA_HOME_DIR:-$HOME/.cache/denoiser/kafka-$KAFKA_VERSION}
KAFKA_RUN_DIR=${KAFKA_RUN_DIR:-/tmp/denoiser-kafka}
KAFKA_PORT=${KAFKA_PORT:-19092}
KAFKA_CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-19093}
KAFKA_HEAP_OPTS=${KAFKA_HEAP_OPTS:--Xmx512m -Xms512m}
KAFKA_START_TIMEOUT=${KAFKA_START_TIMEOUT:-180}
KAFKA_STOP_TIMEOUT=${KAFKA_STOP_TIMEOUT:-30}
JAVA=${JAVA:-java}
MVN=${MVN:-mvn}

LIB=$KAFKA_HOME_DIR/libs
MARKER=$KAFKA_HOME_DIR/.installed # holds the jar count of a complete install
PID_FILE=$KAFKA_RUN_DIR/kafka.pid
LOG_FILE=$KAFKA_RUN_DIR/logs/server.log
DATA_DIR=$KAFKA_RUN_DIR/data
PROPS=$KAFKA_RUN_DIR/server.properties
LOG4J=$KAFKA_RUN_DIR/log4j.properties
CLUSTER_ID_FILE=$KAFKA_RUN_DIR/cluster.id

# Classes the script runs, and the jar each must come from; install checks
# them so a partial or wrong dependency set fails at install, not at start.
readonly REQUIRED_CLASSES=(
	kafka/Kafka.class                                         # kafka_2.13: broker main
	kafka/tools/StorageTool.class                             # kafka_2.13: format, random-uuid
	kafka/server/KafkaRaftServer.class                        # kafka_2.13: KRaft server
	org/apache/kafka/server/config/ServerConfigs.class        # kafka-server
	org/apache/kafka/server/config/ServerLogConfigs.class     # kafka-server-common
	org/apache/kafka/raft/KafkaRaftClient.class               # kafka-raft
	org/apache/kafka/metadata/properties/MetaProperties.class # kafka-metadata
	org/apache/kafka/storage/internals/log/LogConfig.class    # kafka-storage
	org/apache/kafka/coordinator/group/GroupCoordinator.class # kafka-group-coordinator
	org/apache/kafka/tools/api/RecordReader.class             # kafka-tools-api
	org/apache/kafka/clients/admin/Admin.class                # kafka-clients
	org/slf4j/impl/StaticLoggerBinder.class                   # slf4j-reload4j
	org/apache/log4j/Logger.class                             # reload4j
)

log() { printf 'kafka.sh: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
	exit 2
}

is_installed() {
	[[ -f $MARKER && -d $LIB ]] || return 1
	local want have
	want=$(<"$MARKER")
	have=$(find "$LIB" -maxdepth 1 -name '*.jar' | wc -l)
	[[ $want =~ ^[0-9]+$ && $have -eq $want && $have -gt 0 ]]
}

cmd_install() {
	if is_installed; then
		log "Kafka $KAFKA_VERSION already installed in $KAFKA_HOME_DIR ($(<"$MARKER") jars)"
		return 0
	fi
	command -v "$JAVA" >/dev/null || die "java not found (set JAVA=...)"
	command -v "$MVN" >/dev/null || die "maven not found (set MVN=...)"
	mkdir -p "$KAFKA_HOME_DIR"
	local work
	work=$(mktemp -d "$KAFKA_HOME_DIR/.install.XXXXXX")
	# shellcheck disable=SC2064 # expand now: $work is local
	trap "rm -rf '$work'" EXIT
	cat >"$work/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 http://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>denoiser.test</groupId>
  <artifactId>kafka-broker</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_$SCALA_VERSION</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <!-- The broker POM leaves the logging backend out; without one it logs nothing. -->
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-reload4j</artifactId>
      <version>$SLF4J_VERSION</version>
    </dependency>
    <dependency>
      <groupId>ch.qos.reload4j</groupId>
      <artifactId>reload4j</artifactId>
      <version>$RELOAD4J_VERSION</version>
    </dependency>
  </dependencies>
</project>
EOF
	log "installing Kafka $KAFKA_VERSION from Maven Central into $KAFKA_HOME_DIR"
	if ! (cd "$work" && "$MVN" -q -B -ntp -Dstyle.color=never -f pom.xml \
		dependency:copy-dependencies \
		-DincludeScope=runtime \
		-DoutputDirectory="$work/libs") >"$work/mvn.log" 2>&1; then
		tail -n 40 "$work/mvn.log" >&2
		die "mvn dependency:copy-dependencies failed"
	fi

	local class jar found
	for class in "${REQUIRED_CLASSES[@]}"; do
		found=
		for jar in "$work"/libs/*.jar; do
			if unzip -l "$jar" "$class" >/dev/null 2>&1; then
				found=$jar
				break
			fi
		done
		[[ -n $found ]] || die "installed jars lack $class"
	done

	rm -rf "$LIB"
	mv "$work/libs" "$LIB"
	find "$LIB" -maxdepth 1 -name '*.jar' | wc -l | tr -d ' ' >"$MARKER"
	rm -rf "$work"
	trap - EXIT
	log "installed $(<"$MARKER") jars in $LIB"
}

# pid prints the broker's pid if it is running, from the pid file, checking
# that the pid still belongs to this run dir's broker (pids are reused).
pid() {
	[[ -f $PID_FILE ]] || return 1
	local p
	p=$(<"$PID_FILE")
	[[ $p =~ ^[0-9]+$ ]] || return 1
	[[ -r /proc/$p/cmdline ]] || return 1
	tr '\0' ' ' <"/proc/$p/cmdline" | grep -qF -- "kafka.Kafka $PROPS" || return 1
	printf '%s\n' "$p"
}

port_open() {
	# bash's /dev/tcp: no nc needed. Subshell so the fd closes at once.
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

write_config() {
	mkdir -p "$DATA_DIR" "$KAFKA_RUN_DIR/logs"
	cat >"$PROPS" <<EOF
# Generated by scripts/kafka.sh; rewritten on every start.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$DATA_DIR

# Small single-node test settings.
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=2
log.cleaner.dedupe.buffer.size=16777216
# After an unclean stop the controller keeps the old broker registration
# until its session expires (default 9 s); keep that wait short.
broker.session.timeout.ms=3000
broker.heartbeat.interval.ms=500
EOF
	cat >"$LOG4J" <<'EOF'
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka=INFO
log4j.logger.org.apache.kafka=INFO
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.request.logger=WARN
log4j.logger.kafka.controller=INFO
log4j.logger.kafka.log.LogCleaner=WARN
EOF
}

java_opts() {
	# shellcheck disable=SC2206 # heap options are meant to split
	JAVA_OPTS=($KAFKA_HEAP_OPTS
		-XX:+UseG1GC -XX:MaxGCPauseMillis=20
		-Djava.awt.headless=true
		"-Dlog4j.configuration=file:$LOG4J"
		"-Dkafka.logs.dir=$KAFKA_RUN_DIR/logs")
}

format_storage() {
	if [[ -f $DATA_DIR/meta.properties ]]; then
		return 0 # formatted before: keep the data (restart must not lose it)
	fi
	local id
	if [[ -s $CLUSTER_ID_FILE ]]; then
		id=$(<"$CLUSTER_ID_FILE")
	else
		id=$("$JAVA" -cp "$LIB/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
		[[ $id =~ ^[A-Za-z0-9_-]{22}$ ]] || die "StorageTool random-uuid gave '$id'"
		printf '%s\n' "$id" >"$CLUSTER_ID_FILE"
	fi
	log "formatting KRaft storage in $DATA_DIR (cluster id $id)"
	"$JAVA" "-Dlog4j.configuration=file:$LOG4J" -cp "$LIB/*" kafka.tools.StorageTool \
		format -t "$id" -c "$PROPS" >"$KAFKA_RUN_DIR/logs/format.log" 2>&1 || {
		tail -n 30 "$KAFKA_RUN_DIR/logs/format.log" >&2
		die "storage format failed"
	}
}

cmd_start() {
	local p
	if p=$(pid); then
		log "already running (pid $p) on 127.0.0.1:$KAFKA_PORT"
		printf '127.0.0.1:%s\n' "$KAFKA_PORT"
		return 0
	fi
	cmd_install
	for port in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"; do
		! port_open "$port" || die "port $port on 127.0.0.1 is already in use by another process"
	done
	write_config
	format_storage

	local started=$SECONDS t0=${EPOCHREALTIME/[.,]/}
	java_opts
	[[ ! -s $LOG_FILE ]] || mv -f "$LOG_FILE" "$LOG_FILE.prev" # keep one previous run
	# setsid: own session, so the caller's Ctrl-C or exit does not take the
	# broker down with it; only `stop` does. It execs in place (no fork)
	# because a background job is not a process-group leader, so $! is java.
	setsid "$JAVA" "${JAVA_OPTS[@]}" -cp "$LIB/*" kafka.Kafka "$PROPS" \
		>>"$LOG_FILE" 2>&1 </dev/null &
	p=$!
	printf '%s\n' "$p" >"$PID_FILE"
	log "started pid $p, waiting up to ${KAFKA_START_TIMEOUT}s (log: $LOG_FILE)"

	while :; do
		if ! kill -0 "$p" 2>/dev/null; then
			tail -n 40 "$LOG_FILE" >&2
			rm -f "$PID_FILE"
			die "broker exited during start-up"
		fi
		# "Kafka Server started" is logged by KafkaRaftServer once the broker
		# has caught up with the metadata log and is unfenced.
		if grep -qs 'Kafka Server started' "$LOG_FILE" && port_open "$KAFKA_PORT"; then
			break
		fi
		if ((SECONDS - started >= KAFKA_START_TIMEOUT)); then
			tail -n 40 "$LOG_FILE" >&2
			cmd_stop
			die "broker not serving after ${KAFKA_START_TIMEOUT}s"
		fi
		sleep 0.25
	done
	local ms=$(((${EPOCHREALTIME/[.,]/} - t0) / 1000))
	log "serving on 127.0.0.1:$KAFKA_PORT after $((ms / 1000)).$(printf '%03d' $((ms % 1000)))s"
	printf '127.0.0.1:%s\n' "$KAFKA_PORT"
}

cmd_stop() {
	local p
	if ! p=$(pid); then
		rm -f "$PID_FILE"
		log "not running"
		return 0
	fi
	log "stopping pid $p"
	kill -TERM "$p" 2>/dev/null || true
	local deadline=$((SECONDS + KAFKA_STOP_TIMEOUT))
	while kill -0 "$p" 2>/dev/null; do
		if ((SECONDS >= deadline)); then
			log "still running after ${KAFKA_STOP_TIMEOUT}s: SIGKILL"
			kill -KILL "$p" 2>/dev/null || true
			sleep 0.2
			break
		fi
		sleep 0.2
	done
	rm -f "$PID_FILE"
	log "stopped"
}

# signal_broker sends signal $1 to the running broker, logging $2.
signal_broker() {
	local p
	p=$(pid) || die "not running"
	kill "-$1" "$p"
	log "$2 pid $p"
}

cmd_status() {
	local p
	if p=$(pid); then
		if port_open "$KAFKA_PORT"; then
			printf 'running pid=%s bootstrap=127.0.0.1:%s run_dir=%s\n' "$p" "$KAFKA_PORT" "$KAFKA_RUN_DIR"
			return 0
		fi
		printf 'starting pid=%s (port %s not answering yet)\n' "$p" "$KAFKA_PORT"
		return 1
	fi
	printf 'stopped run_dir=%s installed=%s\n' "$KAFKA_RUN_DIR" "$(is_installed && echo yes || echo no)"
	return 1
}

cmd_reset() {
	cmd_stop
	case $KAFKA_RUN_DIR in
	/ | "" | "$HOME") die "refusing to delete KAFKA_RUN_DIR=$KAFKA_RUN_DIR" ;;
	esac
	rm -rf "$KAFKA_RUN_DIR"
	log "deleted $KAFKA_RUN_DIR"
}

case ${1:-} in
install) cmd_install ;;
start) cmd_start ;;
stop) cmd_stop ;;
restart)
	cmd_stop
	cmd_start
	;;
pause) signal_broker STOP paused ;;
resume) signal_broker CONT resumed ;;
status) cmd_status ;;
reset) cmd_reset ;;
logs) tail -n 100 "$LOG_FILE" ;;
*) usage ;;
esac
