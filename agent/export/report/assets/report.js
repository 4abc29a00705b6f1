(function(){
  var tables=document.querySelectorAll('table.sortable');
  Array.prototype.forEach.call(tables,function(t){
    if(!t.tHead||!t.tBodies.length)return;
    Array.prototype.forEach.call(t.tHead.rows[0].cells,function(th,i){
      th.title='click to sort';
      th.addEventListener('click',function(){
        var body=t.tBodies[0],rows=Array.prototype.slice.call(body.rows);
        var desc=th.getAttribute('data-dir')!=='desc';
        th.setAttribute('data-dir',desc?'desc':'asc');
        function key(r){var c=r.cells[i];return c?(c.getAttribute('data-v')||c.textContent):'';}
        rows.sort(function(x,y){
          var a=key(x),b=key(y),fa=parseFloat(a),fb=parseFloat(b);
          var r=(isNaN(fa)||isNaN(fb))?a.localeCompare(b):fa-fb;
          return desc?-r:r;});
        rows.forEach(function(r){body.appendChild(r);});
      });
    });
  });
  document.documentElement.setAttribute('data-sortable-tables',String(tables.length));
})();
