/**
 * The program a job's processes are started with (`node -e`, with
 * `tendril-job <role> <directory>` after it): it reads the core from fd 3
 * to its end, as the parent wrote it, evaluates it and hands over to the
 * core's `bootJob` (src/core/job-process.ts). Through a net.Socket, as the
 * first stage reads, so a non-blocking descriptor works too.
 */
export const JOB_STAGE =
  "const r=require,b=[],s=new(r('net').Socket)({fd:3,writable:false});" +
  "s.on('data',d=>b.push(d));s.on('end',()=>{const c=Buffer.concat(b);s.destroy();" +
  "new(r('vm').Script)(c+'',{filename:'tendril:core'}).runInThisContext()(r).bootJob(c,r)})";
