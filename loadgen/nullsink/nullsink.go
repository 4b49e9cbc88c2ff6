// Package nullsink is a Kafka-protocol endpoint that accepts produce
// requests and throws the data away. It measures the generator's own ceiling:
// with nothing stored, whatever limits the rate is the client.
//
// It answers ApiVersions, Metadata (it leads every partition of every topic
// itself), CreateTopics and Produce (acks=0 requests get no response, as in
// Kafka). Everything else closes the connection. FailProduce makes it
// answer every produce with an error code instead, a deterministic broker
// fault for the generator's retry tests.
package nullsink

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Server is a running null sink.
type Server struct {
	ln         net.Listener
	partitions int32
	mu         sync.Mutex
	topics     map[string]int32
	conns      sync.WaitGroup

	// Requests and Bytes count produce requests and their bytes.
	Requests atomic.Int64
	Bytes    atomic.Int64
	// fail is the error code produced partitions are answered with (low
	// 16 bits; 0: none) and the partition it applies to (high 32 bits;
	// -1: all), in one word so a request sees both from one change.
	fail atomic.Int64
	// nodeID is this sink's broker id in Metadata; leader, when set,
	// is the broker every partition's Metadata names as its leader (a
	// moved leadership, for the clients' retry tests).
	nodeID atomic.Int32
	leader atomic.Pointer[sinkBroker]
}

type sinkBroker struct {
	id   int32
	addr string
}

// SetNodeID sets the broker id this sink gives itself in Metadata.
func (s *Server) SetNodeID(id int32) { s.nodeID.Store(id) }

// SetLeader makes Metadata name broker id at addr (host:port) the leader
// of every partition; pair it with FailProduce(NOT_LEADER_OR_FOLLOWER) to
// move a client to another sink.
func (s *Server) SetLeader(id int32, addr string) {
	s.leader.Store(&sinkBroker{id: id, addr: addr})
}

// FailProduce answers every produced partition with code (a kerr code,
// e.g. kerr.KafkaStorageError.Code) from now on; 0 accepts again.
func (s *Server) FailProduce(code int16) { s.FailPartition(-1, code) }

// FailPartition answers produces to partition (of any topic; -1: every
// partition) with code from now on, and accepts the others.
func (s *Server) FailPartition(partition int32, code int16) {
	s.fail.Store(int64(partition)<<32 | int64(uint16(code)))
}

// failCode is the code to answer partition p with.
func (s *Server) failCode(p int32) int16 {
	f := s.fail.Load()
	if part := int32(f >> 32); part != -1 && part != p {
		return 0
	}
	return int16(uint16(f))
}

// Listen starts a sink on addr (e.g. "127.0.0.1:0"); topics it has not seen
// created get defaultPartitions partitions.
func Listen(addr string, defaultPartitions int32) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{ln: ln, partitions: defaultPartitions, topics: map[string]int32{}}
	go s.accept()
	return s, nil
}

// Addr is the listening address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops accepting; open connections end when their clients close.
func (s *Server) Close() error { return s.ln.Close() }

func (s *Server) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		go s.serve(c)
	}
}

func (s *Server) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReaderSize(c, 1<<20)
	w := bufio.NewWriterSize(c, 64<<10)
	var buf []byte
	for {
		var sz [4]byte
		if _, err := io.ReadFull(r, sz[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(sz[:]))
		if n < 8 || n > 256<<20 {
			return
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return
		}
		resp, err := s.handle(buf)
		if err != nil {
			return
		}
		if resp != nil {
			if _, err := w.Write(resp); err != nil {
				return
			}
		}
		// Flush only when no further request is already buffered, so
		// pipelined requests share a write.
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
}

// handle decodes one request frame and returns the response frame, or nil
// when none is due (acks=0 produce).
func (s *Server) handle(frame []byte) ([]byte, error) {
	key := int16(binary.BigEndian.Uint16(frame[0:]))
	version := int16(binary.BigEndian.Uint16(frame[2:]))
	corr := binary.BigEndian.Uint32(frame[4:])
	req := kmsg.RequestForKey(key)
	if req == nil {
		return nil, fmt.Errorf("unknown key %d", key)
	}
	req.SetVersion(version)
	body := frame[8:]
	if len(body) < 2 {
		return nil, fmt.Errorf("short header")
	}
	idLen := int(int16(binary.BigEndian.Uint16(body)))
	body = body[2:]
	if idLen > 0 {
		body = body[idLen:]
	}
	if req.IsFlexible() {
		body = body[1:] // empty tagged fields in the request header
	}
	var resp kmsg.Response
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		s.Requests.Add(1)
		s.Bytes.Add(int64(len(frame)))
		if err := r.UnsafeReadFrom(body); err != nil {
			return nil, err
		}
		if r.Acks == 0 {
			return nil, nil
		}
		pr := r.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = s.failCode(p.Partition)
				rt.Partitions = append(rt.Partitions, rp)
			}
			pr.Topics = append(pr.Topics, rt)
		}
		resp = pr
	case *kmsg.ApiVersionsRequest:
		// Answered at the version asked: kmsg encodes every version.
		av := r.ResponseKind().(*kmsg.ApiVersionsResponse)
		for _, k := range []struct{ key, max int16 }{{0, 8}, {3, 12}, {18, 3}, {19, 7}} {
			ak := kmsg.NewApiVersionsResponseApiKey()
			ak.ApiKey, ak.MaxVersion = k.key, k.max
			if k.key == 0 {
				ak.MinVersion = 3
			}
			av.ApiKeys = append(av.ApiKeys, ak)
		}
		resp = av
	case *kmsg.MetadataRequest:
		if err := r.ReadFrom(body); err != nil {
			return nil, err
		}
		mr := r.ResponseKind().(*kmsg.MetadataResponse)
		self := sinkBroker{id: s.nodeID.Load(), addr: s.Addr()}
		lead := self
		brokers := []sinkBroker{self}
		if l := s.leader.Load(); l != nil && l.id != self.id {
			lead = *l
			brokers = append(brokers, lead)
		}
		for _, sb := range brokers {
			host, portStr, _ := net.SplitHostPort(sb.addr)
			port, _ := strconv.Atoi(portStr)
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host, b.Port = sb.id, host, int32(port)
			mr.Brokers = append(mr.Brokers, b)
		}
		mr.ControllerID = self.id
		for _, t := range r.Topics {
			if t.Topic == nil {
				continue
			}
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = kmsg.StringPtr(*t.Topic)
			for p := int32(0); p < s.partitionsOf(*t.Topic); p++ {
				mp := kmsg.NewMetadataResponseTopicPartition()
				mp.Partition, mp.Leader = p, lead.id
				mp.Replicas, mp.ISR = []int32{lead.id}, []int32{lead.id}
				mt.Partitions = append(mt.Partitions, mp)
			}
			mr.Topics = append(mr.Topics, mt)
		}
		resp = mr
	case *kmsg.CreateTopicsRequest:
		if err := r.ReadFrom(body); err != nil {
			return nil, err
		}
		cr := r.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, t := range r.Topics {
			n := t.NumPartitions
			if n <= 0 {
				n = s.partitions
			}
			s.mu.Lock()
			s.topics[t.Topic] = n
			s.mu.Unlock()
			ct := kmsg.NewCreateTopicsResponseTopic()
			ct.Topic, ct.NumPartitions, ct.ReplicationFactor = t.Topic, n, 1
			cr.Topics = append(cr.Topics, ct)
		}
		resp = cr
	default:
		return nil, fmt.Errorf("null sink does not serve key %d", key)
	}
	out := make([]byte, 4, 64)
	out = binary.BigEndian.AppendUint32(out, corr)
	// Flexible response headers carry tagged fields, except ApiVersions'.
	if resp.IsFlexible() && key != 18 {
		out = append(out, 0)
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out, nil
}

func (s *Server) partitionsOf(topic string) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.topics[topic]; ok {
		return n
	}
	s.topics[topic] = s.partitions
	return s.partitions
}
